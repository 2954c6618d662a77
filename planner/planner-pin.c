#define G_LOG_DOMAIN "planner-pin"

#include "config.h"

#include <string.h>

#include "planner-error.h"
#include "planner-pin.h"

static gboolean
parse_layout_list (const char *pin_text, const char *text, const PlannerMesh *mesh,
                   PlannerLayout *layouts, guint *n, GError **error)
{
  const char *p = text;
  *n = 0;
  for (;;)
    {
      g_autoptr (GError) local = NULL;
      if (*n >= PLANNER_MAX_OPERANDS)
        {
          g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_PARSE,
                       "pin '%s' gives more than %d layouts", pin_text, PLANNER_MAX_OPERANDS);
          return FALSE;
        }
      while (g_ascii_isspace (*p))
        p++;
      if (!planner_layout_parse_prefix (p, mesh, &layouts[*n], &p, &local))
        {
          g_set_error (error, PLANNER_ERROR, local->code, "pin '%s': %s", pin_text,
                       local->message);
          return FALSE;
        }
      (*n)++;
      while (g_ascii_isspace (*p))
        p++;
      if (*p == '\0')
        return TRUE;
      if (*p != ',')
        {
          g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_PARSE,
                       "pin '%s': expected ',' between layouts at '%s'; write e.g. "
                       "q_proj=[dp,_,_],[mp,_]",
                       pin_text, p);
          return FALSE;
        }
      p++;
    }
}

PlannerPin *
planner_pin_parse (const char *text, const PlannerMesh *mesh, GError **error)
{
  g_return_val_if_fail (text != NULL && mesh != NULL, NULL);

  /* GPatternSpec asserts on a glob that is not UTF-8 (op names are UTF-8, a glob that is
   * not cannot match one anyway). */
  if (!g_utf8_validate (text, -1, NULL))
    {
      g_autofree char *shown = g_utf8_make_valid (text, -1);
      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_PARSE,
                   "pin '%s' is not valid UTF-8; write op names and layouts in UTF-8", shown);
      return NULL;
    }
  const char *eq = strchr (text, '=');
  if (eq == NULL || eq == text)
    {
      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_PARSE,
                   "pin '%s' is not OP=LAYOUTS; write e.g. '*.q_proj=[dp,_,_],[mp,_]'", text);
      return NULL;
    }
  g_autoptr (PlannerPin) pin = g_new0 (PlannerPin, 1);
  pin->text = g_strdup (text);
  pin->glob = g_strstrip (g_strndup (text, eq - text));
  pin->pattern = g_pattern_spec_new (pin->glob);
  pin->priority = 1;

  g_autofree char *rest = g_strdup (eq + 1);
  char *arrow = strstr (rest, "->");
  if (arrow)
    {
      *arrow = '\0';
      if (!parse_layout_list (text, arrow + 2, mesh, pin->outputs, &pin->n_outputs, error))
        return NULL;
    }
  if (!parse_layout_list (text, rest, mesh, pin->inputs, &pin->n_inputs, error))
    return NULL;
  return g_steal_pointer (&pin);
}

PlannerPin *
planner_pin_copy (const PlannerPin *pin)
{
  g_return_val_if_fail (pin != NULL, NULL);
  PlannerPin *copy = g_memdup2 (pin, sizeof *pin);
  copy->text = g_strdup (pin->text);
  copy->glob = g_strdup (pin->glob);
  copy->pattern = g_pattern_spec_copy (pin->pattern);
  return copy;
}

void
planner_pin_free (PlannerPin *pin)
{
  if (pin == NULL)
    return;
  g_free (pin->text);
  g_free (pin->glob);
  g_clear_pointer (&pin->pattern, g_pattern_spec_free);
  g_free (pin);
}

gboolean
planner_pin_matches (const PlannerPin *pin, const char *op_name)
{
  return g_pattern_spec_match_string (pin->pattern, op_name);
}
