/* fuzz-hardware.c: hardware profiles (data/hardware/ files, --hardware FILE, calibrate's
 * output). A profile taken is written and read back equal. */
#include "fuzz-harness.h"

#include "planner-hardware.h"

gboolean
fuzz_hardware (const guint8 *data, gsize size, GError **error)
{
  g_autofree char *text = fuzz_text (data, size);
  g_autoptr (PlannerHardware) hw = planner_hardware_from_json (text, error);
  if (hw == NULL)
    return FALSE;

  g_autoptr (GError) local = NULL;
  g_autofree char *json = planner_hardware_to_json (hw);
  g_autoptr (PlannerHardware) again = planner_hardware_from_json (json, &local);
  if (again == NULL || !planner_hardware_equal (hw, again))
    fuzz_fail ("hardware profile does not read back equal: %s",
               local ? local->message : "a different profile");
  return TRUE;
}

FUZZ_TARGET (fuzz_hardware)
