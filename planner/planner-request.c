#define G_LOG_DOMAIN "planner-request"

#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "planner-plan-private.h"
#include "planner-policy.h"
#include "planner-propagate.h"
#include "planner-request.h"

typedef struct
{
  char *text;
  guint tier;
} RequestPin;

struct _PlannerRequest
{
  char *policy;
  GArray *pins; /* RequestPin */
  PlannerCostConstants constants;
  gboolean allow_tied;
};

static void
request_pin_clear (gpointer data)
{
  g_free (((RequestPin *)data)->text);
}

PlannerRequest *
planner_request_new (void)
{
  PlannerRequest *self = g_new0 (PlannerRequest, 1);
  self->pins = g_array_new (FALSE, FALSE, sizeof (RequestPin));
  g_array_set_clear_func (self->pins, request_pin_clear);
  planner_cost_constants_init (&self->constants);
  return self;
}

PlannerRequest *
planner_request_copy (const PlannerRequest *self)
{
  g_return_val_if_fail (self != NULL, NULL);
  PlannerRequest *copy = planner_request_new ();
  planner_request_set_policy (copy, self->policy);
  for (guint i = 0; i < self->pins->len; i++)
    {
      const RequestPin *p = &g_array_index (self->pins, RequestPin, i);
      planner_request_add_pin (copy, p->text, p->tier);
    }
  copy->constants = self->constants;
  copy->allow_tied = self->allow_tied;
  return copy;
}

void
planner_request_free (PlannerRequest *self)
{
  if (self == NULL)
    return;
  g_free (self->policy);
  g_array_unref (self->pins);
  g_free (self);
}

void
planner_request_set_policy (PlannerRequest *self, const char *policy)
{
  g_return_if_fail (self != NULL);
  char *copy = g_strdup (policy);
  g_free (self->policy);
  self->policy = copy;
}

const char *
planner_request_get_policy (const PlannerRequest *self)
{
  g_return_val_if_fail (self != NULL, NULL);
  return self->policy;
}

void
planner_request_add_pin (PlannerRequest *self, const char *text, guint tier)
{
  g_return_if_fail (self != NULL && text != NULL);
  RequestPin p = { g_strdup (text), tier };
  g_array_append_val (self->pins, p);
}

guint
planner_request_get_n_pins (const PlannerRequest *self)
{
  g_return_val_if_fail (self != NULL, 0);
  return self->pins->len;
}

const char *
planner_request_get_pin (const PlannerRequest *self, guint i, guint *tier)
{
  g_return_val_if_fail (self != NULL && i < self->pins->len, NULL);
  const RequestPin *p = &g_array_index (self->pins, RequestPin, i);
  if (tier)
    *tier = p->tier;
  return p->text;
}

void
planner_request_set_constants (PlannerRequest *self, const PlannerCostConstants *constants)
{
  g_return_if_fail (self != NULL && constants != NULL);
  self->constants = *constants;
}

const PlannerCostConstants *
planner_request_get_constants (const PlannerRequest *self)
{
  g_return_val_if_fail (self != NULL, NULL);
  return &self->constants;
}

void
planner_request_set_allow_tied (PlannerRequest *self, gboolean allow)
{
  g_return_if_fail (self != NULL);
  self->allow_tied = allow;
}

gboolean
planner_request_get_allow_tied (const PlannerRequest *self)
{
  g_return_val_if_fail (self != NULL, FALSE);
  return self->allow_tied;
}

GPtrArray *
planner_request_expand (const PlannerRequest *self, PlannerGraph *graph, const PlannerMesh *mesh,
                        GPtrArray *notes, GError **error)
{
  g_return_val_if_fail (self != NULL && PLANNER_IS_GRAPH (graph) && mesh != NULL, NULL);

  g_autoptr (GPtrArray) pins = NULL;
  if (self->policy)
    {
      pins = planner_policy_expand (self->policy, graph, mesh, notes, error);
      if (pins == NULL)
        return NULL;
      g_ptr_array_set_free_func (pins, (GDestroyNotify)planner_pin_free);
    }
  else
    pins = g_ptr_array_new_with_free_func ((GDestroyNotify)planner_pin_free);
  for (guint i = 0; i < self->pins->len; i++)
    {
      const RequestPin *p = &g_array_index (self->pins, RequestPin, i);
      PlannerPin *pin = planner_pin_parse (p->text, mesh, error);
      if (pin == NULL)
        return NULL;
      pin->priority = p->tier;
      g_ptr_array_add (pins, pin);
    }
  return g_steal_pointer (&pins);
}

PlannerPlan *
planner_request_propagate (const PlannerRequest *self, PlannerGraph *graph, const PlannerMesh *mesh,
                           const PlannerHardware *hw, GPtrArray *extra_pins, GPtrArray *notes,
                           GError **error)
{
  g_return_val_if_fail (self != NULL && PLANNER_IS_GRAPH (graph), NULL);
  g_return_val_if_fail (mesh != NULL && hw != NULL, NULL);

  g_autoptr (GPtrArray) pins = planner_request_expand (self, graph, mesh, notes, error);
  if (pins == NULL)
    return NULL;
  for (guint i = 0; extra_pins && i < extra_pins->len; i++)
    g_ptr_array_add (pins, planner_pin_copy (g_ptr_array_index (extra_pins, i)));

  PlannerPropagateOptions options;
  planner_propagate_options_init (&options);
  options.allow_tied_redistribution = self->allow_tied;
  gint64 start = g_get_monotonic_time ();
  g_autoptr (PlannerPlan) plan = planner_propagate (graph, mesh, hw, pins, &options, error);
  if (plan == NULL)
    return NULL;
  /* The training options change only the totals: finishing again recomputes them. */
  if (memcmp (planner_plan_get_constants (plan), &self->constants, sizeof self->constants) != 0)
    {
      planner_plan_set_constants (plan, &self->constants);
      if (!planner_plan_finish (plan, self->allow_tied, error))
        return NULL;
    }
  planner_plan_set_propagate_ms (plan, (double)(g_get_monotonic_time () - start) / 1000.0);
  planner_plan_set_policy (plan, self->policy);
  return g_steal_pointer (&plan);
}

int
planner_op_block (const char *name, gsize *prefix_len)
{
  g_return_val_if_fail (name != NULL, -1);

  if (prefix_len)
    *prefix_len = 0;
  for (const char *c = name; *c;)
    {
      const char *end = strchr (c, '.');
      gsize len = end ? (gsize)(end - c) : strlen (c);
      gboolean digits = len > 0 && len <= 9;
      for (gsize i = 0; digits && i < len; i++)
        digits = g_ascii_isdigit (c[i]);
      if (digits && end != NULL && c > name)
        {
          if (prefix_len)
            *prefix_len = (gsize)(end - name);
          return (int)strtol (c, NULL, 10);
        }
      if (end == NULL)
        break;
      c = end + 1;
    }
  return -1;
}
