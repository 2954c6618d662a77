/* graphview-palette.h: the colours the graph, its legend, the minimap and the cost chart are
 * drawn in, one palette for the light style and one for the dark.
 *
 * The widget picks the palette from its CSS foreground (light text on a dark theme means the
 * dark style, whether AdwStyleManager or GTK's prefer-dark setting made it so); files are
 * drawn light unless asked otherwise. Text over every node fill and the canvas keeps at least
 * GRAPHVIEW_PALETTE_MIN_CONTRAST (WCAG's ratio for small text) in both palettes.
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef struct
{
  double r, g, b;
} GraphviewRgb;

#define GRAPHVIEW_PALETTE_N_CATEGORIES 7
#define GRAPHVIEW_PALETTE_N_SPLITS 5
#define GRAPHVIEW_PALETTE_MIN_CONTRAST 4.5

typedef struct
{
  gboolean dark;
  GraphviewRgb background; /* the canvas and the file's page */
  /* Op nodes by family: matmul, attention, norms, elementwise, shape ops, embedding and
   * loss, the rest. */
  GraphviewRgb category_fill[GRAPHVIEW_PALETTE_N_CATEGORIES];
  GraphviewRgb block_fill, block_back; /* folded block card, the cards stacked behind it */
  GraphviewRgb frame_fill, frame_line; /* unfolded block frame */
  GraphviewRgb border, text, text_muted;
  GraphviewRgb pinned, defaulted, no_cost;
  GraphviewRgb step, differs, hover;
  GraphviewRgb highlight; /* search matches' ring */
  GraphviewRgb on_mark;    /* text and pin head on a coloured mark */
  GraphviewRgb badge_fill; /* edge badges */
  GraphviewRgb pending;    /* veil over ops decided after the step */
  double pending_alpha;
  GraphviewRgb card; /* the legend's card over the canvas */
  double card_alpha;
  GraphviewRgb matrix_line;
  /* Strategy-matrix cells by split count: 1, 2, 4, 8, 16 and more. */
  GraphviewRgb splits[GRAPHVIEW_PALETTE_N_SPLITS];
  GraphviewRgb cost_low, cost_mid, cost_high; /* redistribution cost ramp */
  GraphviewRgb good, bad;                     /* trial results within / beyond tolerance */
  GraphviewRgb chart_compute, chart_comm;     /* the cost chart's stacked bars */
  GraphviewRgb view_rect;                     /* the minimap's view rectangle */
} GraphviewPalette;

const GraphviewPalette *graphview_palette_get (gboolean dark);
/* WCAG 2 contrast ratio of two colours, 1 to 21. */
double graphview_palette_contrast (GraphviewRgb a, GraphviewRgb b);
/* Whether a foreground colour (the widget's CSS colour) is that of a dark style. */
gboolean graphview_palette_is_dark_foreground (double r, double g, double b);

G_END_DECLS
