/* planner-cost.h: the cost model (semantics.md 7, costs.md).
 *
 * Times are seconds per device. A redistribution step on mesh axis a, with p = size(a), link
 * bandwidth B (bytes/s) and per-step latency alpha (s), where n_in/n_out are the local bytes
 * before/after the step:
 *
 *   AllGather      (p-1) alpha + (p-1)/p n_out / B
 *   ReduceScatter  (p-1) alpha + (p-1)/p n_in / B
 *   AllReduce     2(p-1) alpha + 2(p-1)/p n / B
 *   AllToAll       (p-1) alpha + (p-1)/p n / B
 *   Slice          n_out / memory bandwidth
 *
 * and p = 1 costs 0. Where the profile holds a measured curve for the step, its link and p,
 * the curve replaces the formula (see planner_cost_collective_time).
 */
#pragma once

#include <glib.h>

#include "planner-hardware.h" /* PlannerStepKind, PlannerHardware */
#include "planner-mesh.h"
#include "planner-op-rule.h"

G_BEGIN_DECLS

/* The buffer a step's formula names, which is also the size a measured curve is keyed by:
 * n_out for AllGather and Slice, n_in for the others. */
guint64 planner_cost_step_buffer (PlannerStepKind kind, guint64 n_in, guint64 n_out);

/* Time of one step of @kind over a group of @p devices on @link, moving the buffer @n (see
 * planner_cost_step_buffer). With measured points for (kind, link, p): piecewise-linear in
 * between, after forcing bandwidth to be non-decreasing with size (least-squares monotone fit)
 * and time non-decreasing; beyond the measured range, the slope of a least-squares alpha-beta
 * fit (relative error) continued from the nearest measured point, so the curve has no jump at
 * its ends. Without points: the formula. Slice ignores @link: it is a local copy. */
double planner_cost_collective_time (const PlannerHardware *hw, PlannerStepKind kind,
                                     PlannerLinkKind link, guint p, guint64 n);

/* Time of one redistribution step on mesh axis @axis (its link from
 * planner_hardware_axis_link_kind). */
double planner_cost_step_time (const PlannerHardware *hw, const PlannerMesh *mesh,
                               PlannerStepKind kind, guint axis, guint64 n_in, guint64 n_out);

/* Bytes a device sends over the link in one step, as shown to the user: (p-1)/p of the buffer,
 * twice that for AllReduce, 0 for Slice and for p = 1. */
guint64 planner_cost_step_bytes (PlannerStepKind kind, guint p, guint64 n_in, guint64 n_out);

/* The alpha-beta fit of a measured curve, for display ("calibrated: 21 us + n / 362 GB/s"):
 * alpha in seconds, beta in seconds per byte. FALSE when the profile has no such curve. */
gboolean planner_cost_measurement_fit (const PlannerHardware *hw, PlannerStepKind kind,
                                       PlannerLinkKind link, guint p, double *alpha, double *beta);

/* The step that a forward step turns into in the backward pass (semantics.md 7): AllGather
 * <-> ReduceScatter, AllToAll reversed (an AllToAll of the same size), Slice -> AllGather (the
 * gradient shards are gathered). FALSE for AllReduce, whose transpose is the identity on the
 * partial side and moves nothing. */
gboolean planner_step_kind_backward (PlannerStepKind kind, PlannerStepKind *backward);

/* Op compute: max(flops / peak FLOP/s of @dtype, bytes touched / memory bandwidth). */
double planner_cost_compute_time (const PlannerHardware *hw, PlannerDType dtype, double flops,
                                  double bytes);

/* The training-step and memory model (planner/README.md, "Training step and memory"). */

typedef enum
{
  PLANNER_OPTIMIZER_ADAM, /* m and v in fp32: 2 states */
  PLANNER_OPTIMIZER_SGD,  /* plain SGD: no state */
} PlannerOptimizer;

typedef enum
{
  PLANNER_RECOMPUTE_NONE,
  PLANNER_RECOMPUTE_SELECTIVE, /* Korthikanti et al.: the attention core only */
  PLANNER_RECOMPUTE_FULL,      /* every transformer layer from its input */
} PlannerRecompute;

/* PlannerAttentionKernel and its strings are in planner-hardware.h (the profile's attention
 * curves are keyed by it). */

typedef enum
{
  PLANNER_GRAD_REDUCE_PARAM, /* gradients reduced in the parameters' dtype */
  PLANNER_GRAD_REDUCE_F32,   /* in fp32: FSDP's mixed precision with reduce_dtype float32 (e.g.
                              * Composer's DEFAULT), Megatron's fp32 gradient accumulation */
} PlannerGradReduce;

typedef enum
{
  PLANNER_PREFETCH_PRE,  /* ZeRO-3's backward gathers the next unit while the current one
                          * computes (FSDP's BACKWARD_PRE, FSDP2) */
  PLANNER_PREFETCH_POST, /* after it (FSDP's BACKWARD_POST): each gather is exposed, sharing
                          * the link with the ReduceScatter of the unit before */
} PlannerBackwardPrefetch;

/* How the loss over the logits runs (issue 12). UNFUSED is Hugging Face's ForCausalLMLoss:
 * logits.float(), then cross_entropy = log_softmax (its fp32 output kept for the backward
 * pass) + nll_loss; FUSED a fused linear cross-entropy (Liger-Kernel's, chunked): the logits
 * are never held whole. */
typedef enum
{
  PLANNER_LOSS_UNFUSED,
  PLANNER_LOSS_FUSED,
} PlannerLossKernel;

/* How an RMSNorm runs (issue 12). UNFUSED is Hugging Face's eager LlamaRMSNorm: the input cast
 * to fp32, pow, mean, rsqrt and mul in fp32, the cast back and the weight's mul: autograd
 * keeps the fp32 input and the normalized 16-bit tensor; FUSED a fused kernel (Liger, apex,
 * Transformer Engine) that keeps its input and the per-row rstd. */
typedef enum
{
  PLANNER_NORM_UNFUSED,
  PLANNER_NORM_FUSED,
} PlannerNormKernel;

/* DeepSpeed's reduce_bucket_size default (deepspeed/runtime/zero/config.py: 5e8 elements). */
#define PLANNER_ZERO_BUCKET_ELEMENTS_DEFAULT 5e8

/* Pipeline schedules (issue 18, planner-pipeline.h). */
typedef enum
{
  PLANNER_SCHEDULE_1F1B,        /* PipeDream-Flush: one forward, one backward in the steady state */
  PLANNER_SCHEDULE_GPIPE,       /* every forward, then every backward */
  PLANNER_SCHEDULE_INTERLEAVED, /* 1F1B over virtual_stages chunks per device (Narayanan 2021) */
} PlannerSchedule;

/* Text of an explicit stage split: "0-19,20-39,..." (a layer range per chunk, in order). */
#define PLANNER_MAX_STAGES_TEXT 1024

/* "adam", "sgd"; "none", "selective", "full"; "param", "f32"; "pre", "post";
 * "1f1b", "gpipe", "interleaved"; "unfused", "fused" (loss and RMSNorm kernels). */
const char *planner_loss_kernel_to_string (PlannerLossKernel loss);
gboolean planner_loss_kernel_from_string (const char *text, PlannerLossKernel *loss);
const char *planner_norm_kernel_to_string (PlannerNormKernel norm);
gboolean planner_norm_kernel_from_string (const char *text, PlannerNormKernel *norm);
const char *planner_schedule_to_string (PlannerSchedule schedule);
gboolean planner_schedule_from_string (const char *text, PlannerSchedule *schedule);
const char *planner_optimizer_to_string (PlannerOptimizer optimizer);
gboolean planner_optimizer_from_string (const char *text, PlannerOptimizer *optimizer);
const char *planner_recompute_to_string (PlannerRecompute recompute);
gboolean planner_recompute_from_string (const char *text, PlannerRecompute *recompute);
const char *planner_grad_reduce_to_string (PlannerGradReduce reduce);
gboolean planner_grad_reduce_from_string (const char *text, PlannerGradReduce *reduce);
const char *planner_backward_prefetch_to_string (PlannerBackwardPrefetch prefetch);
gboolean planner_backward_prefetch_from_string (const char *text,
                                                PlannerBackwardPrefetch *prefetch);

/* The constants of the training-step and memory estimates that are not hardware. Every one is
 * shown to the user and editable, and saved with the plan. */
typedef struct
{
  double weight_copies;    /* 1: the weights themselves */
  double grad_copies;      /* 1: their gradients */
  double optimizer_states; /* fp32 states per parameter: 2 for Adam (m and v), 0 for SGD */
  double backward_factor;  /* backward compute = 2x forward */
  /* Added with the training model (absent from older plan files: these defaults). */
  PlannerOptimizer optimizer; /* sets optimizer_states */
  guint zero;                 /* ZeRO stage 0-3 over the data-parallel axes */
  PlannerRecompute recompute;
  PlannerAttentionKernel attention;
  guint micro_batch;    /* sequences per device per micro-batch; 0: the whole local batch */
  double dp_bucket_MiB; /* gradient buckets (DDP's 25 MiB) */
  gboolean dp_overlap;  /* buckets sync while the backward pass runs */
  gboolean no_dropout;  /* the graph's dropout ops have p = 0: identities, no masks */
  /* Added with FSDP's behaviours (absent from older plan files and store rows: these
   * defaults). */
  PlannerGradReduce grad_reduce;             /* the dtype gradients are reduced in */
  PlannerBackwardPrefetch backward_prefetch; /* ZeRO-3's backward gathers */
  /* Pipeline parallelism over the mesh axis "pp" (issue 18; absent from older plan files and
   * store rows: these defaults, which change nothing on a mesh without pp). */
  PlannerSchedule schedule;
  guint micro_batches;                  /* micro-batches per step; 0: from micro_batch (or 1) */
  guint virtual_stages;                 /* chunks per device (interleaved); 0 or 1: one */
  char stages[PLANNER_MAX_STAGES_TEXT]; /* explicit split, "" = balanced */
  /* Memory beyond the stored activations (issue 12; absent from older plan files and store
   * rows: these defaults). */
  PlannerLossKernel loss;      /* the loss over graph outputs named "logits" */
  PlannerNormKernel rms_norm;  /* what an RMSNorm keeps */
  double zero_bucket_elements; /* ZeRO 2/3 gradient bucket (DeepSpeed's reduce_bucket_size,
                                * 5e8): 2 buffers at ZeRO-2 with overlap (overlap_comm), else
                                * 1; 0: none (FSDP) */
} PlannerCostConstants;

void planner_cost_constants_init (PlannerCostConstants *constants);

/* The training options (optimizer .. backward_prefetch) as one line, for the store:
 * "optimizer=adam;zero=3;recompute=full;attention=flash;micro_batch=6;dp_bucket_MiB=25;
 * dp_overlap=1;no_dropout=0;grad_reduce=param;backward_prefetch=pre". Reading sets what the
 * text names on @constants and refuses (FALSE) an unknown key or value; other members stay as
 * they were. */
char *planner_cost_training_to_string (const PlannerCostConstants *constants);
gboolean planner_cost_training_from_string (const char *text, PlannerCostConstants *constants);

/* Model-state bytes per device, split as the JSON `memory` object shows them. */
typedef struct
{
  guint64 parameters;
  guint64 gradients;
  guint64 optimizer;
  guint64 activations;
  guint64 loss;    /* the loss path's fp32 temporaries at their peak (issue 12) */
  guint64 buffers; /* ZeRO's gradient bucket buffers */
  guint64 total;   /* the tensors' bytes: parameters .. buffers */
  /* What a device holds beyond its tensors (planner/README.md, "Reserved memory"): the
   * caching allocator's segments at their high-water mark over the step's allocations and
   * frees replayed, less total, of which the activations' part (their packing, scaled with
   * the micro-batches a pipeline stage holds); the
   * CUDA context, cuBLAS's workspace and NCCL's buffers (runtime = their sum); and
   * reserved_total = total + allocator + runtime, what nvidia-smi shows and what `fits`
   * compares with the device's memory. */
  guint64 allocator;
  guint64 allocator_activations;
  guint64 cuda_context;
  guint64 cublas_workspace;
  guint64 nccl_buffers;
  guint64 runtime;
  guint64 reserved_total;
} PlannerMemory;

/* Sets @memory's total, runtime and reserved_total from its parts. */
void planner_memory_finish (PlannerMemory *memory);

/* What PyTorch's caching allocator reserves (c10/cuda/CUDACachingAllocator.cpp) for @n
 * allocations of @sizes bytes made in that order and all alive at once, with the profile's
 * allocator constants (@efficiency; allocator_min_block_B 0: 0, no allocator modelled). */
guint64 planner_cost_allocator_reserved (const PlannerEfficiency *efficiency,
                                         const guint64 *sizes, guint n);
/* PyTorch's caching allocator replayed over a sequence of allocations and frees
 * (c10/cuda/CUDACachingAllocator.cpp, with the profile's allocator constants): each request
 * rounded, the smallest free block of its pool that holds it taken and split by the source's
 * rules, a new segment when none does; a freed block merges with its free neighbours and
 * stays cached, and no segment is given back (no empty_cache), so the reserved bytes only
 * grow. With allocator_min_block_B 0 each tensor takes its own bytes and gives them back. */
typedef struct _PlannerAllocSim PlannerAllocSim;

PlannerAllocSim *planner_alloc_sim_new (const PlannerEfficiency *efficiency);
void planner_alloc_sim_free (PlannerAllocSim *sim);
/* Returns the block's handle for planner_alloc_sim_release; -1 for 0 bytes (nothing). */
int planner_alloc_sim_malloc (PlannerAllocSim *sim, guint64 bytes);
/* Frees @handle's block (-1: nothing). */
void planner_alloc_sim_release (PlannerAllocSim *sim, int handle);
/* The segments' bytes now, their high-water mark, and the high-water mark of the requests'
 * bytes alive at once. */
guint64 planner_alloc_sim_reserved (const PlannerAllocSim *sim);
guint64 planner_alloc_sim_reserved_peak (const PlannerAllocSim *sim);
guint64 planner_alloc_sim_live_peak (const PlannerAllocSim *sim);

/* NCCL's buffers on one device for one communicator of @ranks ranks of which @node_ranks
 * share a node (planner/README.md, "Reserved memory"): the ring's channels x one
 * connection's buffers of each protocol, plus NVLS's when the profile has NVLS. */
guint64 planner_cost_nccl_buffers (const PlannerEfficiency *efficiency, guint ranks,
                                   guint node_ranks);

/* Model states of @n_params local parameter elements of @dtype, whose gradients are synced
 * over @dp devices (the data-parallel axes the parameter is replicated on): weights and
 * gradients in @dtype, and for a 16-bit @dtype an fp32 master copy; optimizer states in fp32.
 * Mixed-precision Adam is 2 + 2 + 4 + 4 + 4 = 16 bytes a parameter, as is fp32 Adam
 * (4 + 4 + 4 + 4). ZeRO stage 1 shards the master copy and the states over @dp, 2 also the
 * gradients, 3 also the weights. Adds to @memory (parameters, gradients, optimizer). */
void planner_cost_model_states (const PlannerCostConstants *constants, guint64 n_params,
                                PlannerDType dtype, guint dp, PlannerMemory *memory);

/* The step breakdown (seconds per device per global step). */
typedef struct
{
  double forward;         /* forward compute of every micro-batch */
  double backward;        /* backward compute */
  double recompute;       /* recomputed forward compute (and its tensor-parallel collectives) */
  double tp_comm_exposed; /* forward and backward redistributions (not overlapped) */
  double dp_sync_exposed; /* the part of the gradient sync the backward pass does not hide */
  double dp_sync_hidden;  /* the part it hides (shown, not added) */
  double overhead;        /* kernel launches and the optimizer step */
  /* Pipeline parallelism (planner-pipeline.h; 0 without a pp axis). */
  double pipeline_bubble; /* the bottleneck stage idle while the pipeline fills and drains */
  double pipeline_comm;   /* its sends and receives of activations and their gradients */
} PlannerStepBreakdown;

double planner_step_breakdown_total (const PlannerStepBreakdown *breakdown);

/* Achieved compute. GEMMs (MatMul, BatchMatMul, Einsum): @flops at the profile's GEMM efficiency
 * for the size (M N K)^(1/3) = (flops / 2)^(1/3), interpolated in log2(size), or by the
 * memory traffic, whichever is slower. Other ops: @bytes at the profile's memory-bound
 * efficiency of the HBM bandwidth (or their flops at peak). */
double planner_cost_gemm_efficiency (const PlannerHardware *hw, double size);
/* Fused attention's forward + backward throughput as a fraction of the dense peak: the
 * profile's curve for @kernel with the same @causal masking if it has one (else the other),
 * nearest in head dimension (in doublings), linear in log2 of the sequence length @seq between
 * its points and flat beyond. FALSE when the profile has no curve for @kernel (the caller
 * falls back to attention_flash's forward and backward fractions). */
gboolean planner_cost_attention_efficiency (const PlannerHardware *hw,
                                            PlannerAttentionKernel kernel, gboolean causal,
                                            double head_dim, double seq, double *efficiency);
double planner_cost_gemm_time (const PlannerHardware *hw, PlannerDType dtype, double flops,
                               double bytes);
double planner_cost_memory_bound_time (const PlannerHardware *hw, PlannerDType dtype, double flops,
                                       double bytes);

/* Exposed time of a gradient sync in @n buckets whose collective times are @times, while a
 * backward pass of @backward seconds produces them: bucket k (1-based) is ready at
 * backward x k / n and the buckets go out one after another on one stream. Without @overlap,
 * all of it is exposed. */
double planner_cost_bucket_exposed (const double *times, guint n, double backward,
                                    gboolean overlap);

/* Exposed time of @n parameter gathers of @times ahead of a pass of @compute seconds in @n
 * equal segments (ZeRO-3's forward): gather k must be done before segment k starts; the
 * gathers go out one after another from the start of the pass (prefetch). Without @overlap,
 * all of it is exposed. */
double planner_cost_prefetch_exposed (const double *times, guint n, double compute,
                                      gboolean overlap);

/* Exposed time of ZeRO-3's backward pass over @n units with FSDP's BACKWARD_POST prefetch,
 * @gathers and @reduces each unit's AllGather and ReduceScatter in forward order: the pass
 * runs the units last to first, and the gather of unit k is issued only when unit k+1 has its
 * gradients, so the pass waits for it; it runs beside unit k+1's ReduceScatter, each at half
 * the link while both run (gather k takes gathers[k] + min(gathers[k], reduces[k+1])); the
 * ReduceScatter of unit 0 follows the last compute. The other ReduceScatters hide behind the
 * compute of the next unit. */
double planner_cost_post_prefetch_exposed (const double *gathers, const double *reduces, guint n);

/* Mixture of experts: capacity and load balance of one MoE layer (planner/README.md, "Mixture
 * of experts"). Each group (a batch row of @tokens tokens) sends every expert @capacity slots,
 * used or not, so the dispatch and combine AllToAlls and the experts' GEMMs cost the same
 * whatever the routing; the balance decides how many tokens are dropped instead. */
typedef struct
{
  gint64 experts, top_k, tokens, capacity;
  double balanced_load;   /* top_k x tokens / experts: an expert's tokens at perfect balance */
  double capacity_factor; /* capacity / balanced_load */
  double padding;         /* fraction of the slots left empty at perfect balance */
} PlannerCostMoe;

void planner_cost_moe (gint64 experts, gint64 top_k, gint64 tokens, gint64 capacity,
                       PlannerCostMoe *moe);
/* Fraction of the busiest expert's tokens dropped when it is sent @imbalance x its balanced
 * load: 0 up to the capacity factor, 1 - capacity_factor / imbalance beyond. */
double planner_cost_moe_dropped (const PlannerCostMoe *moe, double imbalance);

G_END_DECLS
