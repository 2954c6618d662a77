/* fuzz-pin.c: pin text (GLOB=IN_LAYOUTS[->OUT_LAYOUTS]), as --pin, the pin field and policy
 * rules give it. The input is a mesh line, then the pin: "dp=2,mp=4\n*.c_fc=[dp,_,_],[_,mp]".
 * A pin taken keeps its text, its layouts are well formed, and its copy matches the same op
 * names. */
#include "fuzz-harness.h"

#include <string.h>

#include "planner-pin.h"

static const char *const op_names[] = {
  "transformer.h.0.mlp.c_fc",
  "model.layers.1.self_attn.q_proj",
  "lm_head",
  "",
};

gboolean
fuzz_pin (const guint8 *data, gsize size, GError **error)
{
  g_autofree char *text = fuzz_text (data, size);
  char *newline = strchr (text, '\n');
  if (newline == NULL)
    newline = text + strlen (text);
  g_autofree char *mesh_text = g_strndup (text, newline - text);
  const char *pin_text = *newline ? newline + 1 : newline;

  g_autoptr (PlannerMesh) mesh = planner_mesh_parse (mesh_text, error);
  if (mesh == NULL)
    return FALSE;
  g_autoptr (PlannerPin) pin = planner_pin_parse (pin_text, mesh, error);
  if (pin == NULL)
    return FALSE;

  if (g_strcmp0 (pin->text, pin_text) != 0 || strstr (pin_text, pin->glob) == NULL)
    fuzz_fail ("pin \"%s\" was taken as \"%s\"", pin_text, pin->text);
  if (pin->n_inputs > PLANNER_MAX_OPERANDS || pin->n_outputs > PLANNER_MAX_OPERANDS)
    fuzz_fail ("pin \"%s\": %u inputs, %u outputs", pin_text, pin->n_inputs, pin->n_outputs);
  for (guint i = 0; i < pin->n_inputs; i++)
    if (!planner_layout_is_well_formed (&pin->inputs[i], mesh))
      fuzz_fail ("pin \"%s\": input layout %u is not well formed", pin_text, i);
  for (guint i = 0; i < pin->n_outputs; i++)
    if (!planner_layout_is_well_formed (&pin->outputs[i], mesh))
      fuzz_fail ("pin \"%s\": output layout %u is not well formed", pin_text, i);

  g_autoptr (PlannerPin) copy = planner_pin_copy (pin);
  for (guint i = 0; i < G_N_ELEMENTS (op_names); i++)
    if (planner_pin_matches (pin, op_names[i]) != planner_pin_matches (copy, op_names[i]))
      fuzz_fail ("pin \"%s\" and its copy disagree on op \"%s\"", pin_text, op_names[i]);
  return TRUE;
}

FUZZ_TARGET (fuzz_pin)
