#!/bin/sh
# Every string of the files in po/POTFILES.in has a zh_CN translation (issue 7): extract them
# as the build's shardscope-pot target does and compare with po/zh_CN.po.
set -eu
top="$1"
pot="$(mktemp)"
trap 'rm -f "$pot"' EXIT
cd "$top"
xgettext --package-name=shardscope --from-code=UTF-8 --add-comments \
  --keyword=_ --keyword=N_ --keyword=C_:1c,2 --keyword=NC_:1c,2 --keyword=g_dcgettext:2 \
  --keyword=g_dngettext:2,3 --keyword=g_dpgettext2:2c,3 --flag=N_:1:pass-c-format \
  --flag=C_:2:pass-c-format --flag=NC_:2:pass-c-format --flag=g_dngettext:2:pass-c-format \
  --flag=g_strdup_printf:1:c-format --flag=g_string_printf:2:c-format \
  --flag=g_string_append_printf:2:c-format --flag=g_error_new:3:c-format \
  --flag=g_set_error:4:c-format --flag=g_markup_printf_escaped:1:c-format \
  --flag=g_log:3:c-format --flag=g_print:1:c-format --flag=g_printerr:1:c-format \
  --flag=g_printf:1:c-format --flag=g_fprintf:2:c-format --flag=g_sprintf:2:c-format \
  --flag=g_snprintf:3:c-format \
  --files-from=po/POTFILES.in --directory="$top" -o "$pot"
# msgcmp fails when a msgid of the template has no entry in the translation.
msgcmp --use-untranslated po/zh_CN.po "$pot"
# And no entry is untranslated or fuzzy.
stats="$(msgfmt --check --statistics -o /dev/null po/zh_CN.po 2>&1)"
echo "$stats"
case "$stats" in
  *untranslated*|*fuzzy*) exit 1 ;;
esac
