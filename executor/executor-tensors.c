#define G_LOG_DOMAIN "executor-tensors"

#include "config.h"

#include <json-glib/json-glib.h>
#include <string.h>

#include "executor-error.h"
#include "executor-tensors.h"

/* Host tensors by name, safetensors and .npy files. The format of safetensors: an 8-byte
 * little-endian header length N, N bytes of JSON ({"NAME": {"dtype", "shape",
 * "data_offsets": [begin, end]}, "__metadata__": {...}}), then the data, offsets relative
 * to its start. */

struct _ExecutorTensors
{
  GPtrArray *list;    /* ExecutorHostTensor*, owned */
  GHashTable *byname; /* name -> index + 1 in list */
};

/* No header may be larger: Hugging Face's own reader refuses above 100 MB. */
#define MAX_HEADER_BYTES (100u << 20)

static void
host_tensor_free (gpointer data)
{
  ExecutorHostTensor *t = data;
  g_free (t->name);
  g_free (t->data);
  g_free (t);
}

ExecutorTensors *
executor_tensors_new (void)
{
  ExecutorTensors *self = g_new0 (ExecutorTensors, 1);
  self->list = g_ptr_array_new_with_free_func (host_tensor_free);
  self->byname = g_hash_table_new (g_str_hash, g_str_equal);
  return self;
}

void
executor_tensors_free (ExecutorTensors *self)
{
  if (self == NULL)
    return;
  g_hash_table_unref (self->byname);
  g_ptr_array_unref (self->list);
  g_free (self);
}

ExecutorHostTensor *
executor_tensors_add (ExecutorTensors *self, const char *name, PlannerDType dtype, guint rank,
                      const gint64 *shape, gpointer data)
{
  g_return_val_if_fail (rank <= PLANNER_MAX_RANK, NULL);
  ExecutorHostTensor *t = g_new0 (ExecutorHostTensor, 1);
  t->name = g_strdup (name);
  t->dtype = dtype;
  t->rank = rank;
  if (rank)
    memcpy (t->shape, shape, rank * sizeof (gint64));
  t->data = data;
  gpointer at = g_hash_table_lookup (self->byname, name);
  if (at)
    {
      guint i = GPOINTER_TO_UINT (at) - 1;
      g_hash_table_remove (self->byname, name);
      host_tensor_free (self->list->pdata[i]);
      self->list->pdata[i] = t;
      g_hash_table_insert (self->byname, t->name, GUINT_TO_POINTER (i + 1));
      return t;
    }
  g_ptr_array_add (self->list, t);
  g_hash_table_insert (self->byname, t->name, GUINT_TO_POINTER (self->list->len));
  return t;
}

const ExecutorHostTensor *
executor_tensors_lookup (ExecutorTensors *self, const char *name)
{
  gpointer at = g_hash_table_lookup (self->byname, name);
  return at ? self->list->pdata[GPOINTER_TO_UINT (at) - 1] : NULL;
}

guint
executor_tensors_get_n (ExecutorTensors *self)
{
  return self->list->len;
}

const ExecutorHostTensor *
executor_tensors_get_nth (ExecutorTensors *self, guint i)
{
  g_return_val_if_fail (i < self->list->len, NULL);
  return self->list->pdata[i];
}

gboolean
executor_tensors_remove (ExecutorTensors *self, const char *name)
{
  gpointer at = g_hash_table_lookup (self->byname, name);
  if (at == NULL)
    return FALSE;
  guint i = GPOINTER_TO_UINT (at) - 1;
  g_hash_table_remove (self->byname, name);
  g_ptr_array_remove_index (self->list, i);
  for (guint j = i; j < self->list->len; j++)
    g_hash_table_insert (self->byname, ((ExecutorHostTensor *)self->list->pdata[j])->name,
                         GUINT_TO_POINTER (j + 1));
  return TRUE;
}

gint64
executor_host_tensor_numel (const ExecutorHostTensor *t)
{
  gint64 n = 1;
  for (guint d = 0; d < t->rank; d++)
    n *= t->shape[d];
  return n;
}

static char *
shape_string (const gint64 *shape, guint rank)
{
  GString *s = g_string_new ("[");
  for (guint d = 0; d < rank; d++)
    g_string_append_printf (s, "%s%" G_GINT64_FORMAT, d ? ", " : "", shape[d]);
  g_string_append_c (s, ']');
  return g_string_free (s, FALSE);
}

gboolean
executor_shape_is_view_of (const gint64 *have, guint have_rank, const gint64 *want, guint want_rank)
{
  /* Each stored dim is the product of a run of adjacent graph dims; dims of 1 anywhere are
   * free. */
  guint i = 0;
  for (guint k = 0; k < have_rank; k++)
    {
      if (have[k] == 1)
        continue;
      gint64 prod = 1;
      while (i < want_rank && prod < have[k])
        prod *= want[i++];
      if (prod != have[k])
        return FALSE;
    }
  for (; i < want_rank; i++)
    if (want[i] != 1)
      return FALSE;
  return TRUE;
}

/* Buffers Hugging Face's save_pretrained may write beside the parameters: not weights. */
static gboolean
is_known_buffer (const char *name)
{
  static const char *const suffixes[] = {
    ".attn.bias",
    ".attn.masked_bias",
    "rotary_emb.inv_freq",
    "embeddings.position_ids",
    "embeddings.token_type_ids",
  };
  for (guint i = 0; i < G_N_ELEMENTS (suffixes); i++)
    if (g_str_has_suffix (name, suffixes[i]))
      return TRUE;
  return FALSE;
}

static void
append_limited (GString *s, guint *count, const char *item)
{
  if (*count < 5)
    g_string_append_printf (s, "%s%s", *count ? ", " : "", item);
  (*count)++;
}

static void
finish_list (GString *s, guint count)
{
  if (count > 5)
    g_string_append_printf (s, " and %u more", count - 5);
}

gboolean
executor_tensors_check_parameters (ExecutorTensors *weights, PlannerGraph *graph, GError **error)
{
  g_autoptr (GString) missing = g_string_new (NULL), extra = g_string_new (NULL),
                      bad = g_string_new (NULL);
  guint n_missing = 0, n_extra = 0, n_bad = 0;
  g_autoptr (GHashTable) params = g_hash_table_new (g_str_hash, g_str_equal);
  for (guint i = 0; i < planner_graph_get_n_tensors (graph); i++)
    {
      const PlannerTensor *t = planner_graph_get_tensor (graph, i);
      /* A graph input (ViT's pixel_values, T5's decoder_input_ids; issue 16) may come with
       * the weights: the run reads it as given, as it reads --tokens for input_ids. */
      gboolean input = t->kind == PLANNER_TENSOR_INPUT;
      PlannerDType want_dtype
          = input && t->dtype == PLANNER_DTYPE_I64 ? PLANNER_DTYPE_I64 : PLANNER_DTYPE_F32;
      if (t->kind != PLANNER_TENSOR_PARAMETER && !input)
        continue;
      g_hash_table_add (params, t->name);
      const ExecutorHostTensor *w = executor_tensors_lookup (weights, t->name);
      if (w == NULL && input)
        continue;
      if (w == NULL)
        append_limited (missing, &n_missing, t->name);
      else if (w->dtype != want_dtype
               || !executor_shape_is_view_of (w->shape, w->rank, t->shape, t->rank))
        {
          g_autofree char *have = shape_string (w->shape, w->rank);
          g_autofree char *want = shape_string (t->shape, t->rank);
          g_autofree char *item
              = w->dtype != want_dtype
                    ? g_strdup_printf ("%s is %s, the graph's is %s", t->name,
                                       w->dtype == PLANNER_DTYPE_I64 ? "an integer tensor"
                                                                     : "a float tensor",
                                       planner_dtype_to_string (t->dtype))
                    : g_strdup_printf ("%s is %s, the graph needs %s", t->name, have, want);
          append_limited (bad, &n_bad, item);
        }
    }
  for (guint i = 0; i < executor_tensors_get_n (weights); i++)
    {
      const ExecutorHostTensor *w = executor_tensors_get_nth (weights, i);
      if (!g_hash_table_contains (params, w->name) && !is_known_buffer (w->name))
        append_limited (extra, &n_extra, w->name);
    }
  if (n_missing + n_extra + n_bad == 0)
    return TRUE;
  finish_list (missing, n_missing);
  finish_list (extra, n_extra);
  finish_list (bad, n_bad);
  g_autoptr (GString) msg = g_string_new ("the weights do not fit the model");
  if (n_missing)
    g_string_append_printf (msg, "; %u parameter%s missing: %s", n_missing,
                            n_missing == 1 ? " is" : "s are", missing->str);
  if (n_bad)
    g_string_append_printf (msg, "; %u misshapen: %s", n_bad, bad->str);
  if (n_extra)
    g_string_append_printf (
        msg, "; %u %s of the model: %s", n_extra,
        n_extra == 1 ? "tensor is not a parameter" : "tensors are not parameters", extra->str);
  g_string_append (msg, " (names are the Hugging Face parameter names the model's graph "
                        "uses; check the config matches the checkpoint)");
  g_set_error_literal (error, EXECUTOR_ERROR, EXECUTOR_ERROR_WEIGHTS, msg->str);
  return FALSE;
}

/* ---- safetensors ---- */

typedef struct
{
  const char *name;
  guint size;
  PlannerDType to;
} StDtype;

static const StDtype st_dtypes[] = {
  { "F32", 4, PLANNER_DTYPE_F32 },  { "F16", 2, PLANNER_DTYPE_F32 },
  { "BF16", 2, PLANNER_DTYPE_F32 }, { "F64", 8, PLANNER_DTYPE_F32 },
  { "I64", 8, PLANNER_DTYPE_I64 },  { "I32", 4, PLANNER_DTYPE_I64 },
};

static float
half_to_float (guint16 h)
{
  guint32 sign = (guint32)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  guint32 bits;
  if (exp == 0x1f)
    bits = sign | 0x7f800000u | (man << 13); /* inf, NaN */
  else if (exp != 0)
    bits = sign | ((exp + 112) << 23) | (man << 13);
  else if (man == 0)
    bits = sign;
  else
    {
      /* Subnormal: normalise the mantissa. */
      exp = 113;
      while (!(man & 0x400))
        {
          man <<= 1;
          exp--;
        }
      bits = sign | (exp << 23) | ((man & 0x3ff) << 13);
    }
  float f;
  memcpy (&f, &bits, 4);
  return f;
}

/* @n elements of @src (little-endian, file dtype @dt) into storage. */
static gpointer
convert (const guint8 *src, gint64 n, const StDtype *dt)
{
  if (dt->to == PLANNER_DTYPE_I64)
    {
      gint64 *out = g_new (gint64, MAX (n, 1));
      for (gint64 i = 0; i < n; i++)
        {
          if (dt->size == 8)
            {
              gint64 v;
              memcpy (&v, src + i * 8, 8);
              out[i] = GINT64_FROM_LE (v);
            }
          else
            {
              gint32 v;
              memcpy (&v, src + i * 4, 4);
              out[i] = GINT32_FROM_LE (v);
            }
        }
      return out;
    }
  float *out = g_new (float, MAX (n, 1));
  for (gint64 i = 0; i < n; i++)
    {
      const guint8 *p = src + i * dt->size;
      if (dt->size == 4)
        {
          guint32 b;
          memcpy (&b, p, 4);
          b = GUINT32_FROM_LE (b);
          memcpy (&out[i], &b, 4);
        }
      else if (dt->size == 8)
        {
          guint64 b;
          double d;
          memcpy (&b, p, 8);
          b = GUINT64_FROM_LE (b);
          memcpy (&d, &b, 8);
          out[i] = (float)d;
        }
      else
        {
          guint16 h;
          memcpy (&h, p, 2);
          h = GUINT16_FROM_LE (h);
          if (g_str_equal (dt->name, "BF16"))
            {
              guint32 b = (guint32)h << 16;
              memcpy (&out[i], &b, 4);
            }
          else
            out[i] = half_to_float (h);
        }
    }
  return out;
}

static gboolean
bad_file (GError **error, const char *path, const char *what)
{
  g_set_error (error, EXECUTOR_ERROR, EXECUTOR_ERROR_BAD_FILE, "%s: %s", path, what);
  return FALSE;
}

/* One safetensors entry, every number bounded by the data section of @data_size bytes. */
static gboolean
load_entry (const char *path, const char *name, JsonNode *node, const guint8 *data,
            guint64 data_size, ExecutorTensors *into, GError **error)
{
  g_autofree char *what = NULL;
#define BAD(...)                                                                                   \
  do                                                                                               \
    {                                                                                              \
      what = g_strdup_printf (__VA_ARGS__);                                                        \
      return bad_file (error, path, what);                                                         \
    }                                                                                              \
  while (0)
  if (!JSON_NODE_HOLDS_OBJECT (node))
    BAD ("tensor %s: its header entry is not an object", name);
  JsonObject *o = json_node_get_object (node);
  JsonNode *dn = json_object_get_member (o, "dtype"), *sn = json_object_get_member (o, "shape"),
           *on = json_object_get_member (o, "data_offsets");
  if (!dn || json_node_get_value_type (dn) != G_TYPE_STRING || !sn || !JSON_NODE_HOLDS_ARRAY (sn)
      || !on || !JSON_NODE_HOLDS_ARRAY (on))
    BAD ("tensor %s: its header entry needs dtype (a string), shape and data_offsets "
         "(arrays)",
         name);
  const char *dname = json_node_get_string (dn);
  const StDtype *dt = NULL;
  for (guint i = 0; i < G_N_ELEMENTS (st_dtypes); i++)
    if (g_str_equal (dname, st_dtypes[i].name))
      dt = &st_dtypes[i];
  if (dt == NULL)
    BAD ("tensor %s: dtype %s is not supported (F32, F16, BF16, F64, I64 or I32)", name, dname);
  JsonArray *sa = json_node_get_array (sn), *oa = json_node_get_array (on);
  guint rank = json_array_get_length (sa);
  if (rank > PLANNER_MAX_RANK)
    BAD ("tensor %s has %u dims, at most %d are supported", name, rank, PLANNER_MAX_RANK);
  gint64 shape[PLANNER_MAX_RANK] = { 0 };
  guint64 n = 1;
  for (guint d = 0; d < rank; d++)
    {
      JsonNode *e = json_array_get_element (sa, d);
      if (json_node_get_value_type (e) != G_TYPE_INT64 || json_node_get_int (e) < 0)
        BAD ("tensor %s: shape dim %u is not a size", name, d);
      shape[d] = json_node_get_int (e);
      /* Bounded by the data section, so the product cannot overflow. */
      if (shape[d] > 0 && n > data_size / (guint64)shape[d] + 1)
        BAD ("tensor %s: its shape holds more elements than the file has bytes", name);
      n *= (guint64)shape[d];
    }
  if (json_array_get_length (oa) != 2)
    BAD ("tensor %s: data_offsets must be [begin, end]", name);
  gint64 off[2];
  for (guint k = 0; k < 2; k++)
    {
      JsonNode *e = json_array_get_element (oa, k);
      if (json_node_get_value_type (e) != G_TYPE_INT64 || json_node_get_int (e) < 0)
        BAD ("tensor %s: data_offsets[%u] is not an offset", name, k);
      off[k] = json_node_get_int (e);
    }
  if (off[0] > off[1] || (guint64)off[1] > data_size)
    BAD ("tensor %s: data_offsets [%" G_GINT64_FORMAT ", %" G_GINT64_FORMAT
         "] fall outside the %" G_GUINT64_FORMAT " bytes of data",
         name, off[0], off[1], data_size);
  if (n > data_size || (guint64)(off[1] - off[0]) != n * dt->size)
    BAD ("tensor %s: %s of shape holding %" G_GUINT64_FORMAT " elements needs %" G_GUINT64_FORMAT
         " bytes, data_offsets give %" G_GINT64_FORMAT,
         name, dt->name, n, n * dt->size, off[1] - off[0]);
  if (executor_tensors_lookup (into, name))
    BAD ("tensor %s is given twice", name);
  executor_tensors_add (into, name, dt->to, rank, shape, convert (data + off[0], (gint64)n, dt));
  return TRUE;
#undef BAD
}

/* Adds the tensors of one file; @names, when given, receives their names. */
static gboolean
load_file (const char *path, ExecutorTensors *into, GPtrArray *names, GError **error)
{
  g_autoptr (GError) local = NULL;
  g_autoptr (GMappedFile) file = g_mapped_file_new (path, FALSE, &local);
  if (file == NULL)
    {
      g_set_error (error, EXECUTOR_ERROR, EXECUTOR_ERROR_BAD_FILE, "%s", local->message);
      return FALSE;
    }
  const guint8 *bytes = (const guint8 *)g_mapped_file_get_contents (file);
  guint64 size = g_mapped_file_get_length (file), hlen;
  if (size < 8)
    return bad_file (error, path,
                     "shorter than the 8-byte header length: not a safetensors "
                     "file");
  memcpy (&hlen, bytes, 8);
  hlen = GUINT64_FROM_LE (hlen);
  if (hlen > MAX_HEADER_BYTES || hlen > size - 8)
    {
      g_autofree char *what = g_strdup_printf (
          "the header says it is %" G_GUINT64_FORMAT " bytes, but the file has %" G_GUINT64_FORMAT
          " after the length (and at most %u are accepted): not a safetensors file, or "
          "truncated",
          hlen, size - 8, MAX_HEADER_BYTES);
      return bad_file (error, path, what);
    }
  g_autoptr (JsonParser) parser = json_parser_new ();
  if (!json_parser_load_from_data (parser, (const char *)bytes + 8, (gssize)hlen, &local))
    {
      g_autofree char *what
          = g_strdup_printf ("the JSON header does not parse: %s", local->message);
      return bad_file (error, path, what);
    }
  JsonNode *root = json_parser_get_root (parser);
  if (root == NULL || !JSON_NODE_HOLDS_OBJECT (root))
    return bad_file (error, path, "the JSON header is not an object");
  JsonObject *obj = json_node_get_object (root);
  g_autoptr (GList) members = json_object_get_members (obj);
  for (GList *l = members; l; l = l->next)
    {
      const char *name = l->data;
      if (g_str_equal (name, "__metadata__"))
        continue;
      if (!load_entry (path, name, json_object_get_member (obj, name), bytes + 8 + hlen,
                       size - 8 - hlen, into, error))
        return FALSE;
      if (names)
        g_ptr_array_add (names, g_strdup (name));
    }
  return TRUE;
}

static gboolean
load_index (const char *path, ExecutorTensors *into, GError **error)
{
  g_autoptr (GError) local = NULL;
  g_autoptr (JsonParser) parser = json_parser_new ();
  if (!json_parser_load_from_file (parser, path, &local))
    {
      g_autofree char *what = g_strdup_printf ("the index does not parse: %s", local->message);
      return bad_file (error, path, what);
    }
  JsonNode *root = json_parser_get_root (parser);
  JsonObject *wm = NULL;
  if (root && JSON_NODE_HOLDS_OBJECT (root))
    {
      JsonNode *n = json_object_get_member (json_node_get_object (root), "weight_map");
      if (n && JSON_NODE_HOLDS_OBJECT (n))
        wm = json_node_get_object (n);
    }
  if (wm == NULL)
    return bad_file (error, path, "an index needs a \"weight_map\" object");
  g_autofree char *dir = g_path_get_dirname (path);
  g_autoptr (GHashTable) shards = g_hash_table_new (g_str_hash, g_str_equal);
  g_autoptr (GPtrArray) order = g_ptr_array_new ();
  g_autoptr (GList) members = json_object_get_members (wm);
  for (GList *l = members; l; l = l->next)
    {
      JsonNode *n = json_object_get_member (wm, l->data);
      const char *shard
          = json_node_get_value_type (n) == G_TYPE_STRING ? json_node_get_string (n) : NULL;
      /* Shards sit beside the index: a path elsewhere is refused. */
      if (shard == NULL || *shard == '\0' || strchr (shard, '/') || strchr (shard, '\\')
          || g_str_equal (shard, "..") || g_str_equal (shard, "."))
        {
          g_autofree char *what = g_strdup_printf (
              "weight_map[%s] must be the file name of a shard beside the index", (char *)l->data);
          return bad_file (error, path, what);
        }
      if (!g_hash_table_contains (shards, shard))
        {
          g_hash_table_add (shards, (gpointer)shard);
          g_ptr_array_add (order, (gpointer)shard);
        }
    }
  for (guint i = 0; i < order->len; i++)
    {
      g_autofree char *file = g_build_filename (dir, order->pdata[i], NULL);
      g_autoptr (GPtrArray) names = g_ptr_array_new_with_free_func (g_free);
      if (!load_file (file, into, names, error))
        return FALSE;
      /* Each tensor is where the map says, and nowhere else. */
      for (guint k = 0; k < names->len; k++)
        {
          JsonNode *n = json_object_get_member (wm, names->pdata[k]);
          if (n == NULL || json_node_get_value_type (n) != G_TYPE_STRING
              || !g_str_equal (json_node_get_string (n), order->pdata[i]))
            {
              g_autofree char *what
                  = g_strdup_printf ("shard %s holds %s, which the weight_map does not place there",
                                     (char *)order->pdata[i], (char *)names->pdata[k]);
              return bad_file (error, path, what);
            }
        }
    }
  for (GList *l = members; l; l = l->next)
    if (!executor_tensors_lookup (into, l->data))
      {
        g_autofree char *what
            = g_strdup_printf ("weight_map places %s in %s, which lacks it", (char *)l->data,
                               json_node_get_string (json_object_get_member (wm, l->data)));
        return bad_file (error, path, what);
      }
  return TRUE;
}

ExecutorTensors *
executor_safetensors_load (const char *path, GError **error)
{
  g_autoptr (ExecutorTensors) t = executor_tensors_new ();
  gboolean ok;
  if (g_file_test (path, G_FILE_TEST_IS_DIR))
    {
      g_autofree char *single = g_build_filename (path, "model.safetensors", NULL);
      g_autofree char *index = g_build_filename (path, "model.safetensors.index.json", NULL);
      if (g_file_test (single, G_FILE_TEST_EXISTS))
        ok = load_file (single, t, NULL, error);
      else if (g_file_test (index, G_FILE_TEST_EXISTS))
        ok = load_index (index, t, error);
      else
        {
          g_set_error (error, EXECUTOR_ERROR, EXECUTOR_ERROR_BAD_FILE,
                       "%s has neither model.safetensors nor model.safetensors.index.json; "
                       "give a folder as save_pretrained writes it (safe_serialization) or a "
                       ".safetensors file",
                       path);
          return NULL;
        }
    }
  else if (g_str_has_suffix (path, ".json"))
    ok = load_index (path, t, error);
  else
    ok = load_file (path, t, NULL, error);
  return ok ? g_steal_pointer (&t) : NULL;
}

gboolean
executor_safetensors_save (ExecutorTensors *tensors, const char *path, GError **error)
{
  g_autoptr (JsonBuilder) b = json_builder_new ();
  json_builder_begin_object (b);
  guint64 offset = 0;
  for (guint i = 0; i < executor_tensors_get_n (tensors); i++)
    {
      const ExecutorHostTensor *t = executor_tensors_get_nth (tensors, i);
      guint64 bytes
          = (guint64)executor_host_tensor_numel (t) * (t->dtype == PLANNER_DTYPE_I64 ? 8 : 4);
      json_builder_set_member_name (b, t->name);
      json_builder_begin_object (b);
      json_builder_set_member_name (b, "dtype");
      json_builder_add_string_value (b, t->dtype == PLANNER_DTYPE_I64 ? "I64" : "F32");
      json_builder_set_member_name (b, "shape");
      json_builder_begin_array (b);
      for (guint d = 0; d < t->rank; d++)
        json_builder_add_int_value (b, t->shape[d]);
      json_builder_end_array (b);
      json_builder_set_member_name (b, "data_offsets");
      json_builder_begin_array (b);
      json_builder_add_int_value (b, (gint64)offset);
      json_builder_add_int_value (b, (gint64)(offset + bytes));
      json_builder_end_array (b);
      json_builder_end_object (b);
      offset += bytes;
    }
  json_builder_end_object (b);
  g_autoptr (JsonGenerator) gen = json_generator_new ();
  g_autoptr (JsonNode) root = json_builder_get_root (b);
  json_generator_set_root (gen, root);
  gsize hlen;
  g_autofree char *header = json_generator_to_data (gen, &hlen);
  /* The data starts 8-byte aligned: the header is padded with spaces, as the format
   * allows. */
  gsize padded = (hlen + 7) & ~(gsize)7;
  g_autoptr (GByteArray) out = g_byte_array_sized_new ((guint)MIN (8 + padded + offset, G_MAXUINT));
  guint64 le = GUINT64_TO_LE ((guint64)padded);
  g_byte_array_append (out, (const guint8 *)&le, 8);
  g_byte_array_append (out, (const guint8 *)header, (guint)hlen);
  for (gsize i = hlen; i < padded; i++)
    g_byte_array_append (out, (const guint8 *)" ", 1);
  for (guint i = 0; i < executor_tensors_get_n (tensors); i++)
    {
      const ExecutorHostTensor *t = executor_tensors_get_nth (tensors, i);
      /* Host order is little-endian on every platform this builds for (x86-64, aarch64). */
      g_byte_array_append (
          out, t->data,
          (guint)(executor_host_tensor_numel (t) * (t->dtype == PLANNER_DTYPE_I64 ? 8 : 4)));
    }
  g_autoptr (GError) local = NULL;
  if (!g_file_set_contents (path, (const char *)out->data, (gssize)out->len, &local))
    {
      g_set_error (error, EXECUTOR_ERROR, EXECUTOR_ERROR_FAILED, "%s", local->message);
      return FALSE;
    }
  return TRUE;
}

/* ---- .npy ---- */

gboolean
executor_npy_load_ids (const char *path, const char *name, ExecutorTensors *into, GError **error)
{
  g_autoptr (GError) local = NULL;
  g_autoptr (GMappedFile) file = g_mapped_file_new (path, FALSE, &local);
  if (file == NULL)
    {
      g_set_error (error, EXECUTOR_ERROR, EXECUTOR_ERROR_BAD_FILE, "%s", local->message);
      return FALSE;
    }
  const guint8 *bytes = (const guint8 *)g_mapped_file_get_contents (file);
  gsize size = g_mapped_file_get_length (file);
  /* \x93NUMPY, major, minor, header length (2 bytes in 1.0, 4 in 2.0 and 3.0). */
  if (size < 10 || memcmp (bytes, "\x93NUMPY", 6) != 0)
    return bad_file (error, path, "not a .npy file (no \\x93NUMPY magic)");
  guint major = bytes[6];
  gsize hlen, start;
  if (major == 1)
    {
      hlen = (gsize)bytes[8] | (gsize)bytes[9] << 8;
      start = 10;
    }
  else if ((major == 2 || major == 3) && size >= 12)
    {
      hlen = (gsize)bytes[8] | (gsize)bytes[9] << 8 | (gsize)bytes[10] << 16
             | (gsize)bytes[11] << 24;
      start = 12;
    }
  else
    return bad_file (error, path, "unknown .npy version");
  if (hlen > size - start || hlen > 1 << 20)
    return bad_file (error, path, "the header is longer than the file");
  g_autofree char *header = g_strndup ((const char *)bytes + start, hlen);
  /* The header is a Python dict literal: read its three keys. */
  g_autoptr (GRegex) re_descr = g_regex_new ("'descr':\\s*'([^']*)'", 0, 0, NULL);
  g_autoptr (GRegex) re_fortran = g_regex_new ("'fortran_order':\\s*(True|False)", 0, 0, NULL);
  g_autoptr (GRegex) re_shape = g_regex_new ("'shape':\\s*\\(([^)]*)\\)", 0, 0, NULL);
  g_autoptr (GMatchInfo) m1 = NULL, m2 = NULL, m3 = NULL;
  if (!g_regex_match (re_descr, header, 0, &m1) || !g_regex_match (re_fortran, header, 0, &m2)
      || !g_regex_match (re_shape, header, 0, &m3))
    return bad_file (error, path, "the header lacks descr, fortran_order or shape");
  g_autofree char *descr = g_match_info_fetch (m1, 1);
  g_autofree char *fortran = g_match_info_fetch (m2, 1);
  g_autofree char *shape_text = g_match_info_fetch (m3, 1);
  guint size_of;
  if (g_str_equal (descr, "<i8") || g_str_equal (descr, "|i8"))
    size_of = 8;
  else if (g_str_equal (descr, "<i4") || g_str_equal (descr, "|i4"))
    size_of = 4;
  else
    {
      g_autofree char *what = g_strdup_printf (
          "token ids must be int32 or int64 (little-endian), the array is %s", descr);
      return bad_file (error, path, what);
    }
  if (g_str_equal (fortran, "True"))
    return bad_file (error, path,
                     "the array is in Fortran order; save it C-ordered "
                     "(np.ascontiguousarray)");
  g_auto (GStrv) dims = g_strsplit (shape_text, ",", -1);
  gint64 shape[PLANNER_MAX_RANK];
  guint rank = 0;
  guint64 n = 1;
  for (guint i = 0; dims[i]; i++)
    {
      g_strstrip (dims[i]);
      if (*dims[i] == '\0')
        continue;
      guint64 v;
      if (rank == PLANNER_MAX_RANK
          || !g_ascii_string_to_unsigned (dims[i], 10, 0, G_MAXINT32, &v, NULL))
        return bad_file (error, path, "the shape is not a tuple of at most 8 sizes");
      shape[rank++] = (gint64)v;
      n *= v;
      if (n > size)
        return bad_file (error, path, "the shape is larger than the file");
    }
  gsize data = start + hlen;
  if (n * size_of != size - data)
    {
      g_autofree char *what = g_strdup_printf ("the shape holds %" G_GUINT64_FORMAT
                                               " ids (%" G_GUINT64_FORMAT " bytes) but the file "
                                               "has %" G_GSIZE_FORMAT " bytes of data",
                                               n, n * size_of, size - data);
      return bad_file (error, path, what);
    }
  StDtype dt = { "I", size_of, PLANNER_DTYPE_I64 };
  executor_tensors_add (into, name, PLANNER_DTYPE_I64, rank, shape,
                        convert (bytes + data, (gint64)n, &dt));
  return TRUE;
}
