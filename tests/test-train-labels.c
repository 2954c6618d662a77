/* The training step's loss for the families that are no decoder-only language model
 * (issue 16): T5 and ViT, on small random-weight versions of their hub configs
 * (tests/data/zoo/). The loss is checked against cross-entropy computed here, in double, from
 * the step's own logits and the labels by their definition (given ones with a row left out,
 * ViT's default row b mod classes, T5's default the decoder's next token); the gradient
 * against central differences of that loss (the classifier's bias and the patch embedding's
 * convolution, the first op of the graph, so every backward kernel of ViT is on the path);
 * the sharded step's loss with given labels against the unsharded one; and the refusals. */
#include "config.h"

#include <json-glib/json-glib.h>
#include <math.h>
#include <string.h>

#include "executor-error.h"
#include "executor-train.h"
#include "executor-trial.h"
#include "planner-model.h"
#include "planner-policy.h"
#include "planner-propagate.h"

#define B 2

static const char *const vit_shrink
    = "{\"hidden_size\": 16, \"intermediate_size\": 24, \"num_hidden_layers\": 1, "
      "\"num_attention_heads\": 2, \"image_size\": 4, \"patch_size\": 2, "
      "\"id2label\": {\"0\": \"a\", \"1\": \"b\", \"2\": \"c\", \"3\": \"d\", \"4\": \"e\", "
      "\"5\": \"f\"}}";
static const char *const t5_shrink
    = "{\"vocab_size\": 40, \"d_model\": 16, \"d_kv\": 4, \"d_ff\": 24, \"num_layers\": 1, "
      "\"num_heads\": 4, \"relative_attention_num_buckets\": 8, "
      "\"relative_attention_max_distance\": 6}";

/* tests/data/zoo/@file with @members set over its own. */
static PlannerGraph *
zoo_graph (const char *file, const char *members, gint64 seq)
{
  g_autofree char *path = g_test_build_filename (G_TEST_DIST, "data", "zoo", file, NULL);
  g_autoptr (JsonParser) parser = json_parser_new ();
  g_autoptr (JsonParser) over = json_parser_new ();
  g_autoptr (GError) error = NULL;
  g_assert_true (json_parser_load_from_file (parser, path, &error));
  g_assert_true (json_parser_load_from_data (over, members, -1, &error));
  JsonObject *config = json_node_get_object (json_parser_get_root (parser));
  JsonObject *o = json_node_get_object (json_parser_get_root (over));
  g_autoptr (GList) names = json_object_get_members (o);
  for (GList *l = names; l; l = l->next)
    json_object_set_member (config, l->data, json_node_copy (json_object_get_member (o, l->data)));
  if (json_object_has_member (config, "label2id"))
    json_object_remove_member (config, "label2id");
  g_autoptr (JsonGenerator) gen = json_generator_new ();
  json_generator_set_root (gen, json_parser_get_root (parser));
  g_autofree char *text = json_generator_to_data (gen, NULL);
  PlannerModelOptions options;
  planner_model_options_init (&options);
  options.batch = B;
  options.seq = seq;
  PlannerGraph *g = planner_hf_import_json (text, &options, &error);
  g_assert_no_error (error);
  return g;
}

/* The unsharded step; its "loss", "logits" and "grad.*". */
static ExecutorTensors *
step (PlannerGraph *g, ExecutorTensors *sources, const ExecutorHostTensor *labels)
{
  g_autoptr (GError) error = NULL;
  ExecutorTrainOptions options;
  executor_train_options_init (&options);
  options.labels = labels;
  ExecutorTensors *out = executor_tensors_new ();
  g_assert_true (executor_train_step_reference (g, sources, &options, out, &error));
  g_assert_no_error (error);
  return out;
}

static double
loss_of (ExecutorTensors *out)
{
  return ((const float *)executor_tensors_lookup (out, "loss")->data)[0];
}

/* log sum exp (z) - z[label], in double. */
static double
cross_entropy (const float *z, gint64 v, gint64 label)
{
  double mx = -INFINITY, sum = 0;
  for (gint64 j = 0; j < v; j++)
    mx = MAX (mx, z[j]);
  for (gint64 j = 0; j < v; j++)
    sum += exp ((double)z[j] - mx);
  return log (sum) + mx - z[label];
}

static ExecutorHostTensor *
add_labels (ExecutorTensors *set, guint rank, const gint64 *shape, const gint64 *values)
{
  gint64 n = 1;
  for (guint d = 0; d < rank; d++)
    n *= shape[d];
  return executor_tensors_add (set, "labels", PLANNER_DTYPE_I64, rank, shape,
                               g_memdup2 (values, (gsize)n * sizeof (gint64)));
}

/* Given labels, row 1 left out: the loss is row 0's cross-entropy alone; without labels,
 * the mean of row b's with class b. */
static void
test_vit_labels (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (PlannerGraph) g = zoo_graph ("vit-base-patch16-224.json", vit_shrink, 0);
  g_autoptr (ExecutorTensors) sources = executor_trial_sources (g, 5, NULL, &error);
  g_assert_no_error (error);
  g_autoptr (ExecutorTensors) given = executor_tensors_new ();
  const gint64 shape[] = { B }, values[] = { 4, EXECUTOR_TRAIN_IGNORE };
  const ExecutorHostTensor *labels = add_labels (given, 1, shape, values);
  g_autoptr (ExecutorTensors) out = step (g, sources, labels);
  const ExecutorHostTensor *logits = executor_tensors_lookup (out, "logits");
  g_assert_cmpint (logits->shape[1], ==, 6);
  const float *z = logits->data;
  double want = cross_entropy (z, 6, 4);
  g_test_message ("vit, labels {4, -100}: loss %.9g, by hand %.9g", loss_of (out), want);
  g_assert_cmpfloat (fabs (loss_of (out) - want), <=, 1e-6 * want);

  g_autoptr (ExecutorTensors) dflt = step (g, sources, NULL);
  z = executor_tensors_lookup (dflt, "logits")->data;
  want = (cross_entropy (z, 6, 0) + cross_entropy (z + 6, 6, 1)) / 2;
  g_test_message ("vit, default labels {0, 1}: loss %.9g, by hand %.9g", loss_of (dflt), want);
  g_assert_cmpfloat (fabs (loss_of (dflt) - want), <=, 1e-6 * want);

  /* The sharded step reads the same labels. */
  g_autoptr (PlannerMesh) mesh = planner_mesh_parse ("dp=2,mp=2", &error);
  g_autoptr (PlannerHardware) hw = planner_hardware_new_builtin ("cpu-local", NULL);
  g_autoptr (GPtrArray) pins = planner_policy_expand ("megatron", g, mesh, NULL, &error);
  g_assert_no_error (error);
  PlannerPropagateOptions popt;
  planner_propagate_options_init (&popt);
  g_autoptr (PlannerPlan) plan = planner_propagate (g, mesh, hw, pins, &popt, &error);
  g_assert_no_error (error);
  ExecutorTrainOptions options;
  executor_train_options_init (&options);
  options.labels = labels;
  g_autoptr (ExecutorTensors) sharded = executor_tensors_new ();
  g_assert_true (executor_train_step_sharded (plan, sources, &options, sharded, NULL, &error));
  g_assert_no_error (error);
  g_test_message ("vit, labels {4, -100}, megatron on dp=2,mp=2: loss %.9g", loss_of (sharded));
  g_assert_cmpfloat (fabs (loss_of (sharded) - loss_of (out)), <=, 1e-6 * loss_of (out));
}

/* d loss / d w against (loss (w + h) - loss (w - h)) / 2h, element by element, the step's
 * loss in f32 (round-off about 1e-7 of the loss, over 2h). */
static void
check_finite_difference (PlannerGraph *g, ExecutorTensors *sources, const char *param,
                         gint64 n_check)
{
  ExecutorHostTensor *w = (ExecutorHostTensor *)executor_tensors_lookup (sources, param);
  g_assert_nonnull (w);
  g_autoptr (ExecutorTensors) out = step (g, sources, NULL);
  g_autofree char *gname = g_strconcat ("grad.", param, NULL);
  const float *grad = executor_tensors_lookup (out, gname)->data;
  gint64 n = MIN (executor_host_tensor_numel (w), n_check);
  double h = 1e-2, worst = 0, scale = 0;
  for (gint64 e = 0; e < n; e++)
    scale = MAX (scale, fabs (grad[e]));
  for (gint64 e = 0; e < n; e++)
    {
      float *x = (float *)w->data + e, keep = *x;
      *x = keep + (float)h;
      g_autoptr (ExecutorTensors) up = step (g, sources, NULL);
      *x = keep - (float)h;
      g_autoptr (ExecutorTensors) down = step (g, sources, NULL);
      *x = keep;
      double fd = (loss_of (up) - loss_of (down)) / (2 * h);
      worst = MAX (worst, fabs (fd - grad[e]) / scale);
    }
  g_test_message ("%s: %" G_GINT64_FORMAT " entries, gradient against central differences "
                  "(h %g): worst %.3g of the largest, %.3g",
                  param, n, h, worst, scale);
  g_assert_cmpfloat (scale, >, 0);
  g_assert_cmpfloat (worst, <=, 5e-3);
}

static void
test_vit_finite_difference (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (PlannerGraph) g = zoo_graph ("vit-base-patch16-224.json", vit_shrink, 0);
  g_autoptr (ExecutorTensors) sources = executor_trial_sources (g, 5, NULL, &error);
  g_assert_no_error (error);
  check_finite_difference (g, sources, "classifier.bias", 6);
  check_finite_difference (g, sources, "vit.embeddings.patch_embeddings.projection.weight", 12);
  check_finite_difference (g, sources, "vit.embeddings.cls_token", 16);
}

/* T5 without labels: the decoder's next token at every position but the last, whose row is
 * left out of the mean. */
static void
test_t5_labels (void)
{
  g_autoptr (GError) error = NULL;
  const gint64 S = 6;
  g_autoptr (PlannerGraph) g = zoo_graph ("t5-small.json", t5_shrink, S);
  g_autoptr (ExecutorTensors) sources = executor_trial_sources (g, 5, NULL, &error);
  g_assert_no_error (error);
  g_autoptr (ExecutorTensors) out = step (g, sources, NULL);
  const ExecutorHostTensor *logits = executor_tensors_lookup (out, "logits");
  const gint64 *dec = executor_tensors_lookup (sources, "decoder_input_ids")->data;
  const gint64 *enc = executor_tensors_lookup (sources, "input_ids")->data;
  gint64 v = logits->shape[2];
  double want = 0, encoder_labels = 0;
  for (gint64 r = 0; r < B * S; r++)
    if (r % S != S - 1)
      {
        want += cross_entropy ((const float *)logits->data + r * v, v, dec[r + 1]);
        encoder_labels += cross_entropy ((const float *)logits->data + r * v, v, enc[r + 1]);
      }
  want /= (double)(B * (S - 1));
  encoder_labels /= (double)(B * (S - 1));
  g_test_message ("t5, default labels: loss %.9g, by hand %.9g (with the encoder's tokens "
                  "%.9g)",
                  loss_of (out), want, encoder_labels);
  g_assert_cmpfloat (fabs (loss_of (out) - want), <=, 1e-6 * want);
  g_assert_cmpfloat (fabs (encoder_labels - want), >, 1e-3 * want);

  /* Central differences need a smooth loss: t5-small's ReLU has kinks a step of h crosses;
   * T5 v1.1's gated-gelu (gelu_new times a linear gate) has none. */
  g_autofree char *gated = g_strdup_printf ("%.*s, \"feed_forward_proj\": \"gated-gelu\", "
                                            "\"tie_word_embeddings\": false}",
                                            (int)strlen (t5_shrink) - 1, t5_shrink);
  g_autoptr (PlannerGraph) gg = zoo_graph ("t5-small.json", gated, S);
  g_autoptr (ExecutorTensors) gsources = executor_trial_sources (gg, 5, NULL, &error);
  g_assert_no_error (error);
  /* The embedding (read by both stacks and lm_head, unscaled here), the position bias
   * table, cross-attention, the decoder's last T5 layer norm and the gate. */
  check_finite_difference (gg, gsources, "shared.weight", 8);
  check_finite_difference (
      gg, gsources, "encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight", 8);
  check_finite_difference (gg, gsources, "decoder.block.0.layer.1.EncDecAttention.k.weight", 8);
  check_finite_difference (gg, gsources, "decoder.final_layer_norm.weight", 8);
  check_finite_difference (gg, gsources, "encoder.block.0.layer.1.DenseReluDense.wi_1.weight", 8);
}

static void
test_refused (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (PlannerGraph) g = zoo_graph ("vit-base-patch16-224.json", vit_shrink, 0);
  g_autoptr (ExecutorTensors) sources = executor_trial_sources (g, 5, NULL, &error);
  g_assert_no_error (error);
  ExecutorTrainOptions options;
  executor_train_options_init (&options);
  g_autoptr (ExecutorTensors) set = executor_tensors_new ();
  g_autoptr (ExecutorTensors) out = executor_tensors_new ();

  const gint64 two[] = { B }, beyond[] = { 1, 6 };
  options.labels = add_labels (set, 1, two, beyond);
  g_assert_false (executor_train_step_reference (g, sources, &options, out, &error));
  g_assert_error (error, EXECUTOR_ERROR, EXECUTOR_ERROR_WEIGHTS);
  g_assert_nonnull (strstr (error->message, "label 6 at row 1 is outside the 6 classes"));
  g_clear_error (&error);

  const gint64 three[] = { 3 }, values[] = { 0, 1, 2 };
  options.labels = add_labels (set, 1, three, values);
  g_assert_false (executor_train_step_reference (g, sources, &options, out, &error));
  g_assert_error (error, EXECUTOR_ERROR, EXECUTOR_ERROR_WEIGHTS);
  g_assert_nonnull (strstr (error->message, "one integer a row of the logits, 2"));
  g_assert_nonnull (strstr (error->message, "not 3 integers"));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/train-labels/vit", test_vit_labels);
  g_test_add_func ("/train-labels/vit/finite-difference", test_vit_finite_difference);
  g_test_add_func ("/train-labels/t5", test_t5_labels);
  g_test_add_func ("/train-labels/refused", test_refused);
  return g_test_run ();
}
