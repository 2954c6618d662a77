/* planner-hardware.h: hardware profiles (semantics.md 2, costs.md).
 *
 * A profile holds the figures the cost model needs: per-device peak FLOP/s per dtype, memory
 * bandwidth and capacity, the intra-node and inter-node links, and optionally measured
 * collective times from a calibration run. Figures are kept in the units of the profile file
 * (TFLOP/s, GB/s, GB, us; G = 1e9), so what the user edits is what is saved, exactly.
 */
#pragma once

#include <glib.h>

#include "planner-mesh.h"
#include "planner-op-rule.h"

G_BEGIN_DECLS

/* The steps of a redistribution (semantics.md 6). planner-cost.h includes this header, so the
 * enum is there for everyone who includes either; it lives here because measured curves are
 * keyed by it. */
typedef enum
{
  PLANNER_STEP_ALL_REDUCE,
  PLANNER_STEP_ALL_GATHER,
  PLANNER_STEP_REDUCE_SCATTER,
  PLANNER_STEP_ALL_TO_ALL,
  PLANNER_STEP_SLICE,
  PLANNER_N_STEP_KINDS
} PlannerStepKind;

/* "AllReduce", "AllGather", "ReduceScatter", "AllToAll", "Slice". */
const char *planner_step_kind_to_string (PlannerStepKind kind);
gboolean planner_step_kind_from_string (const char *text, PlannerStepKind *kind);

typedef enum
{
  PLANNER_LINK_INTRA, /* inside a node (NVLink, shared memory) */
  PLANNER_LINK_INTER, /* between nodes (InfiniBand) */
  PLANNER_N_LINKS
} PlannerLinkKind;

/* "intra", "inter". */
const char *planner_link_kind_to_string (PlannerLinkKind kind);
gboolean planner_link_kind_from_string (const char *text, PlannerLinkKind *kind);

#define PLANNER_MAX_LINK_NAME 32

typedef struct
{
  char name[PLANNER_MAX_LINK_NAME]; /* what it is, for people: "NVLink 4" */
  double bandwidth_GBps;            /* bus bandwidth per device, one direction (nccl-tests busbw) */
  double latency_us;                /* per ring step */
} PlannerLink;

typedef struct
{
  guint64 bytes; /* the buffer the formula of the step names (planner-cost.h) */
  double seconds;
} PlannerMeasuredPoint;

/* Attention kernels: a training option (planner-cost.h) that the profile's attention curves are
 * keyed by, hence here. */
typedef enum
{
  PLANNER_ATTENTION_FLASH,   /* FlashAttention-2 (PyTorch's flash backend): keeps q, k, v, the
                              * output and logsumexp */
  PLANNER_ATTENTION_UNFUSED, /* keeps the s x s scores (softmax, dropout mask and output) */
  PLANNER_ATTENTION_FLASH1,  /* FlashAttention 1 (and its Triton port): flash's memory, slower */
  PLANNER_N_ATTENTION_KERNELS
} PlannerAttentionKernel;

/* "flash", "unfused", "flash1". */
const char *planner_attention_kernel_to_string (PlannerAttentionKernel kernel);
gboolean planner_attention_kernel_from_string (const char *text, PlannerAttentionKernel *kernel);

/* Achieved-throughput constants (planner-cost.h, planner/README.md "Efficiency"): the profile's
 * optional "efficiency" object. A profile without it computes at datasheet peak, as before. */
#define PLANNER_MAX_EFFICIENCY_POINTS 16
#define PLANNER_MAX_ATTENTION_CURVES 16

/* One fused attention kernel's forward + backward throughput by sequence length, as
 * FlashAttention's benchmark measures it: FLOPs 3.5 x 4 b s^2 h d (halved when causal) over the
 * time of both passes, as a fraction of the dense peak. */
typedef struct
{
  PlannerAttentionKernel kernel; /* a fused one: flash or flash1 */
  gboolean causal;
  guint head_dim;
  guint n;
  double seq[PLANNER_MAX_EFFICIENCY_POINTS]; /* increasing */
  double efficiency[PLANNER_MAX_EFFICIENCY_POINTS];
} PlannerAttentionCurve;

typedef struct
{
  guint n_gemm;                                          /* 0: GEMMs at peak */
  double gemm_size[PLANNER_MAX_EFFICIENCY_POINTS];       /* (M N K)^(1/3), increasing */
  double gemm_efficiency[PLANNER_MAX_EFFICIENCY_POINTS]; /* fraction of dense peak, (0, 1] */
  double flash_forward;       /* flash attention forward, fraction of dense peak */
  double flash_backward;      /* its backward (2.5x the forward FLOPs) */
  double memory_bound;        /* fraction of HBM bandwidth that norms and elementwise ops reach */
  double kernel_launch_us;    /* per kernel */
  guint nics_per_node;        /* 0: one inter-node link per device only */
  double nvls_bandwidth_GBps; /* AllReduce busbw inside a node with NVLink SHARP; 0: none */
  /* NCCL's LL protocol on the intra-node ring (planner/README.md, "Collectives by message
   * size"): base + per-step latency, busbw = factor x the link's, capped; factor 0: no LL. */
  double ll_base_us;
  double ll_step_us;
  double ll_bandwidth_factor;
  double ll_bandwidth_GBps; /* the cap; 0: none */
  /* NCCL's LL128 protocol on the same ring: base + per-step latency, busbw = factor x the
   * link's, capped (NCCL: channels x perChMaxRingLL128Bw); factor 0: no LL128. */
  double ll128_base_us;
  double ll128_step_us;
  double ll128_bandwidth_factor;
  double ll128_bandwidth_GBps; /* the cap; 0: none */
  /* NCCL's own latencies of its Simple-protocol ring inside a node: a base once plus one per
   * ring step, in place of links.intra.latency_us a step; both 0: latency_us as before. */
  double ring_base_us;
  double ring_step_us;
  /* NVLS by chunk: NCCL's chunk size for the message, a fixed cost per round of chunks and
   * the rounds the pipeline takes to fill; channels 0: NVLS as the ring formula at its busbw. */
  double nvls_latency_us;
  double nvls_chunk_us;
  double nvls_fill_chunks;
  double nvls_channels;
  double nvls_max_chunk_KiB;
  guint n_attention;          /* 0: fused attention at flash_forward / flash_backward */
  PlannerAttentionCurve attention[PLANNER_MAX_ATTENTION_CURVES];
  double overlap_slowdown; /* compute slows by this fraction while a collective overlaps it */
  /* The profile's "runtime_memory" object (planner/README.md, "Reserved memory"); 0: not
   * counted. */
  double cuda_context_MiB;      /* per process and device */
  double cublas_workspace_KiB;  /* PyTorch's cuBLAS workspace per handle and stream */
  double nccl_channels;         /* ring channels of a communicator */
  double nccl_buffer_KiB;       /* one ring connection's buffers, all protocols */
  double allocator_min_block_B; /* PyTorch's caching allocator: kMinBlockSize .. */
  double allocator_small_size_KiB;
  double allocator_small_segment_KiB;
  double allocator_large_segment_KiB;
  double allocator_min_large_alloc_KiB;
  double allocator_round_large_KiB;
} PlannerEfficiency;

typedef struct _PlannerHardware PlannerHardware;

/* Built-ins ship in the planner's GResource (data/hardware/NAME.json). */
const char *const *planner_hardware_builtin_names (void);
PlannerHardware *planner_hardware_new_builtin (const char *name, GError **error);
PlannerHardware *planner_hardware_load_file (const char *path, GError **error);
/* A built-in name, else an existing file; anything else is PLANNER_ERROR_UNKNOWN_HARDWARE,
 * whose message lists the built-ins. */
PlannerHardware *planner_hardware_lookup (const char *name_or_path, GError **error);
/* The versioned profile format documented in planner/README.md. Malformed input is
 * PLANNER_ERROR_MALFORMED_FILE naming the field. */
PlannerHardware *planner_hardware_from_json (const char *text, GError **error);
char *planner_hardware_to_json (const PlannerHardware *hw);
gboolean planner_hardware_save_file (const PlannerHardware *hw, const char *path, GError **error);

/* A profile with every figure set to 1 and no measurements, to be filled in by setters. */
PlannerHardware *planner_hardware_new (const char *name);
PlannerHardware *planner_hardware_copy (const PlannerHardware *hw);
void planner_hardware_free (PlannerHardware *hw);
gboolean planner_hardware_equal (const PlannerHardware *a, const PlannerHardware *b);

const char *planner_hardware_get_name (const PlannerHardware *hw);
void planner_hardware_set_name (PlannerHardware *hw, const char *name);
const char *planner_hardware_get_description (const PlannerHardware *hw);
void planner_hardware_set_description (PlannerHardware *hw, const char *description);
/* Dense peak, TFLOP/s (1e12 FLOP/s). */
double planner_hardware_get_peak_tflops (const PlannerHardware *hw, PlannerDType dtype);
void planner_hardware_set_peak_tflops (PlannerHardware *hw, PlannerDType dtype, double tflops);
/* Memory (HBM) bandwidth, GB/s. */
double planner_hardware_get_memory_bandwidth_GBps (const PlannerHardware *hw);
void planner_hardware_set_memory_bandwidth_GBps (PlannerHardware *hw, double GBps);
/* Memory capacity per device, GB (1e9 bytes). */
double planner_hardware_get_memory_GB (const PlannerHardware *hw);
void planner_hardware_set_memory_GB (PlannerHardware *hw, double GB);
/* Devices per node (8 unless the profile says otherwise). */
guint planner_hardware_get_node_size (const PlannerHardware *hw);
void planner_hardware_set_node_size (PlannerHardware *hw, guint node_size);
const PlannerLink *planner_hardware_get_link (const PlannerHardware *hw, PlannerLinkKind kind);
void planner_hardware_set_link (PlannerHardware *hw, PlannerLinkKind kind, const PlannerLink *link);

const PlannerEfficiency *planner_hardware_get_efficiency (const PlannerHardware *hw);
void planner_hardware_set_efficiency (PlannerHardware *hw, const PlannerEfficiency *efficiency);

/* SI figures for the formulas. */
double planner_hardware_peak_flops (const PlannerHardware *hw, PlannerDType dtype);
double planner_hardware_memory_bandwidth (const PlannerHardware *hw); /* bytes/s */
guint64 planner_hardware_memory_bytes (const PlannerHardware *hw);

/* Which link mesh axis @axis rides: walking from the minor end, axes whose running product of
 * sizes stays <= node_size are intra-node; the first axis past it, and every axis more major,
 * cross nodes. */
PlannerLinkKind planner_hardware_axis_link_kind (const PlannerHardware *hw, const PlannerMesh *mesh,
                                                 guint axis);
gboolean planner_hardware_axis_is_intra (const PlannerHardware *hw, const PlannerMesh *mesh,
                                         guint axis);
const PlannerLink *planner_hardware_axis_link (const PlannerHardware *hw, const PlannerMesh *mesh,
                                               guint axis);

/* Measured curves (calibration): per step kind, link and group size @p (>= 2), points sorted by
 * bytes; a second point at the same size replaces the first. Slice is a local copy and has no
 * curve. */
void planner_hardware_add_measurement (PlannerHardware *hw, PlannerStepKind kind,
                                       PlannerLinkKind link, guint p, guint64 bytes,
                                       double seconds);
/* The points of one curve, or NULL with *n_points = 0. */
const PlannerMeasuredPoint *planner_hardware_get_measurement (const PlannerHardware *hw,
                                                              PlannerStepKind kind,
                                                              PlannerLinkKind link, guint p,
                                                              guint *n_points);
/* Every curve, in (kind, link, p) order, for listing. */
guint planner_hardware_get_n_measurements (const PlannerHardware *hw);
const PlannerMeasuredPoint *planner_hardware_get_nth_measurement (const PlannerHardware *hw,
                                                                  guint i, PlannerStepKind *kind,
                                                                  PlannerLinkKind *link, guint *p,
                                                                  guint *n_points);
void planner_hardware_clear_measurements (PlannerHardware *hw);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (PlannerHardware, planner_hardware_free)

G_END_DECLS
