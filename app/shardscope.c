#define G_LOG_DOMAIN "shardscope"
#include "config.h"

#include <glib/gi18n.h>
#include <locale.h>

#include "app-application.h"

int
main (int argc, char *argv[])
{
  setlocale (LC_ALL, "");
  app_application_bind_text_domain ();
  g_autoptr (AppApplication) app = app_application_new ();
  return g_application_run (G_APPLICATION (app), argc, argv);
}
