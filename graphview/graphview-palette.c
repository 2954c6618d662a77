#define G_LOG_DOMAIN "graphview-palette"

#include "config.h"

#include <math.h>

#include "graphview-palette.h"

/* The light palette: pale family fills with near-black text, as the files have always been
 * drawn. */
static const GraphviewPalette light = {
  .dark = FALSE,
  .background = { 1.000, 1.000, 1.000 },
  .category_fill = {
    { 0.859, 0.910, 0.984 }, { 0.918, 0.863, 0.984 }, { 0.851, 0.949, 0.867 },
    { 1.000, 0.953, 0.812 }, { 0.925, 0.925, 0.925 }, { 0.992, 0.878, 0.839 },
    { 0.953, 0.953, 0.953 },
  },
  .block_fill = { 0.890, 0.910, 0.937 },
  .block_back = { 0.934, 0.946, 0.962 },
  .frame_fill = { 0.969, 0.976, 0.988 },
  .frame_line = { 0.788, 0.827, 0.878 },
  .border = { 0.373, 0.388, 0.408 },
  .text = { 0.125, 0.129, 0.141 },
  .text_muted = { 0.350, 0.370, 0.400 },
  .pinned = { 0.102, 0.337, 0.859 },
  .defaulted = { 0.851, 0.467, 0.024 },
  .no_cost = { 0.604, 0.627, 0.651 },
  .step = { 0.882, 0.114, 0.455 },
  .differs = { 0.486, 0.227, 0.929 },
  .hover = { 0.298, 0.545, 0.961 },
  /* GNOME's search-match yellow, darkened so that it stands out on the light fills. */
  .highlight = { 0.898, 0.647, 0.039 },
  .on_mark = { 1.000, 1.000, 1.000 },
  .badge_fill = { 1.000, 1.000, 1.000 },
  .pending = { 0.900, 0.900, 0.900 },
  .pending_alpha = 0.82,
  .card = { 1.000, 1.000, 1.000 },
  .card_alpha = 0.85,
  .matrix_line = { 0.550, 0.580, 0.620 },
  .splits = {
    { 1.000, 1.000, 1.000 }, { 0.776, 0.859, 0.937 }, { 0.420, 0.682, 0.839 },
    { 0.129, 0.443, 0.710 }, { 0.031, 0.188, 0.420 },
  },
  .cost_low = { 0.965, 0.765, 0.259 },
  .cost_mid = { 0.941, 0.541, 0.141 },
  .cost_high = { 0.776, 0.157, 0.157 },
  .good = { 0.180, 0.550, 0.270 },
  .bad = { 0.800, 0.160, 0.160 },
  .chart_compute = { 0.208, 0.518, 0.894 },
  .chart_comm = { 1.000, 0.471, 0.000 },
  .view_rect = { 0.208, 0.518, 0.894 },
};

/* The dark palette: Adwaita's dark window colour behind deep family fills, light text, and
 * the marks and ramps lightened so that they stand out from dark fills (more splits are
 * brighter here, as more ink is darker in the light palette). */
static const GraphviewPalette dark = {
  .dark = TRUE,
  .background = { 0.141, 0.141, 0.141 },
  .category_fill = {
    { 0.161, 0.235, 0.365 }, { 0.259, 0.196, 0.376 }, { 0.161, 0.298, 0.200 },
    { 0.345, 0.298, 0.133 }, { 0.247, 0.247, 0.247 }, { 0.376, 0.212, 0.176 },
    { 0.216, 0.216, 0.216 },
  },
  .block_fill = { 0.220, 0.239, 0.275 },
  .block_back = { 0.188, 0.200, 0.224 },
  .frame_fill = { 0.173, 0.180, 0.196 },
  .frame_line = { 0.353, 0.384, 0.424 },
  .border = { 0.640, 0.660, 0.690 },
  .text = { 0.933, 0.933, 0.941 },
  .text_muted = { 0.760, 0.770, 0.790 },
  .pinned = { 0.384, 0.627, 1.000 },
  .defaulted = { 1.000, 0.639, 0.235 },
  .no_cost = { 0.470, 0.490, 0.520 },
  .step = { 1.000, 0.400, 0.640 },
  .differs = { 0.706, 0.529, 1.000 },
  .hover = { 0.471, 0.682, 0.980 },
  .highlight = { 1.000, 0.792, 0.204 },
  .on_mark = { 0.070, 0.070, 0.080 },
  .badge_fill = { 0.118, 0.118, 0.129 },
  .pending = { 0.100, 0.100, 0.100 },
  .pending_alpha = 0.78,
  .card = { 0.141, 0.141, 0.141 },
  .card_alpha = 0.88,
  .matrix_line = { 0.450, 0.470, 0.500 },
  .splits = {
    { 0.200, 0.200, 0.220 }, { 0.200, 0.329, 0.502 }, { 0.247, 0.502, 0.753 },
    { 0.451, 0.678, 0.918 }, { 0.753, 0.867, 1.000 },
  },
  .cost_low = { 0.965, 0.765, 0.259 },
  .cost_mid = { 0.980, 0.560, 0.200 },
  .cost_high = { 0.960, 0.300, 0.300 },
  .good = { 0.341, 0.741, 0.420 },
  .bad = { 0.960, 0.380, 0.380 },
  .chart_compute = { 0.384, 0.627, 0.918 },
  .chart_comm = { 1.000, 0.639, 0.282 },
  .view_rect = { 0.471, 0.682, 0.980 },
};

const GraphviewPalette *
graphview_palette_get (gboolean is_dark)
{
  return is_dark ? &dark : &light;
}

/* sRGB to linear light, as WCAG 2 defines relative luminance. */
static double
linear (double c)
{
  return c <= 0.04045 ? c / 12.92 : pow ((c + 0.055) / 1.055, 2.4);
}

static double
luminance (GraphviewRgb c)
{
  return 0.2126 * linear (c.r) + 0.7152 * linear (c.g) + 0.0722 * linear (c.b);
}

double
graphview_palette_contrast (GraphviewRgb a, GraphviewRgb b)
{
  double la = luminance (a), lb = luminance (b);
  return (MAX (la, lb) + 0.05) / (MIN (la, lb) + 0.05);
}

gboolean
graphview_palette_is_dark_foreground (double r, double g, double b)
{
  /* A dark style writes light text: more than mid-grey luminance. */
  return luminance ((GraphviewRgb){ r, g, b }) > 0.18;
}
