#define G_LOG_DOMAIN "planner-onnx-import"

#include "config.h"

#include <math.h>
#include <string.h>

#include "planner-error.h"
#include "planner-model-private.h"
#include "planner-onnx-import.h"

/* ONNX -> PlannerGraph in three passes (planner/README.md, "ONNX"):
 * 1. read: the bytes are walked once against the schema's descriptors (nesting, counts and
 *    lengths bounded) before protobuf-c unpacks them; then every value gets its producer and
 *    consumers, every constant its data (small ones only).
 * 2. match: the subgraphs exporters write for one module are claimed as one op (RMSNorm,
 *    SiLU, GeLU, rotary embedding, attention, Linear with its transposed weight and bias).
 * 3. build: from the graph outputs back, what is used is live; live nodes in file order are
 *    folded (shape arithmetic on constants, Shape of a tensor whose shape is known), dropped
 *    (Identity, Dropout, Cast to the same type) or added as Shardscope ops. */

gboolean
planner_onnx_is_onnx_path (const char *model)
{
  g_return_val_if_fail (model != NULL, FALSE);
  return g_str_has_suffix (model, ".onnx") || g_str_has_suffix (model, ".ONNX");
}

#if SHARDSCOPE_HAVE_ONNX

#include <errno.h>
#include <glib/gstdio.h>

#include "onnx.pb-c.h"

gboolean
planner_onnx_supported (void)
{
  return TRUE;
}

/* ---- Bounds: real models are far below each. */

#define MAX_FILE_BYTES (G_GUINT64_CONSTANT (1) << 31) /* protobuf's own limit */
#define MAX_NESTING 32
/* Messages, strings and byte fields together: each costs an allocation of up to ~200 bytes
 * from as few as 2 bytes of input. */
#define MAX_ELEMENTS (1u << 22)
#define MAX_NODES (1u << 20)
#define MAX_DIM G_MAXINT32
#define MAX_NUMEL (G_GINT64_CONSTANT (1) << 62)
/* Constants at most this large carry their data (shape arithmetic, scales, rotary tables). */
#define MAX_FOLD 65536
/* ... and all folds of one file together. */
#define MAX_FOLD_TOTAL (G_GUINT64_CONSTANT (1) << 23)
#define DEFAULT_BATCH 8
#define DEFAULT_SEQ 1024

typedef struct
{
  guint64 elements;
  GError **error;
  const char *what;
} WireBudget;

static gboolean
wire_fail (WireBudget *budget, const char *message)
{
  g_set_error (budget->error, PLANNER_ERROR, PLANNER_ERROR_MALFORMED_FILE,
               "%s: not an ONNX model file: %s", budget->what, message);
  return FALSE;
}

static gboolean
wire_varint (const guint8 **p, const guint8 *end, guint64 *value)
{
  guint64 v = 0;

  for (guint shift = 0; shift < 64; shift += 7)
    {
      if (*p >= end)
        return FALSE;
      guint8 byte = *(*p)++;
      v |= (guint64)(byte & 0x7f) << shift;
      if (!(byte & 0x80))
        {
          *value = v;
          return TRUE;
        }
    }
  return FALSE;
}

/* protobuf-c recurses per nested message and allocates per element without limits; this walk
 * refuses what would exhaust the stack or the memory before it unpacks anything. */
static gboolean
wire_check (WireBudget *budget, const guint8 *p, const guint8 *end,
            const ProtobufCMessageDescriptor *descriptor, guint depth)
{
  if (depth > MAX_NESTING)
    return wire_fail (budget, "messages nest too deep");
  while (p < end)
    {
      guint64 tag, length;
      const ProtobufCFieldDescriptor *field;

      if (!wire_varint (&p, end, &tag))
        return wire_fail (budget, "a field tag is cut off");
      if ((tag >> 3) == 0 || (tag >> 3) > G_MAXUINT32)
        return wire_fail (budget, "a field number is out of range");
      field = protobuf_c_message_descriptor_get_field (descriptor, (unsigned)(tag >> 3));
      switch (tag & 7)
        {
        case 0:
          if (!wire_varint (&p, end, &length))
            return wire_fail (budget, "a number is cut off");
          break;
        case 1:
          if (end - p < 8)
            return wire_fail (budget, "a 64-bit number is cut off");
          p += 8;
          break;
        case 5:
          if (end - p < 4)
            return wire_fail (budget, "a 32-bit number is cut off");
          p += 4;
          break;
        case 2:
          if (!wire_varint (&p, end, &length) || length > (guint64)(end - p))
            return wire_fail (budget, "a field is longer than the bytes left");
          if (field != NULL && field->type == PROTOBUF_C_TYPE_MESSAGE)
            {
              if (!wire_check (budget, p, p + length, field->descriptor, depth + 1))
                return FALSE;
            }
          /* A packed list of numbers costs up to 8 bytes a byte; a string or byte field one
           * allocation. */
          budget->elements += field != NULL && field->label == PROTOBUF_C_LABEL_REPEATED
                                      && field->type != PROTOBUF_C_TYPE_STRING
                                      && field->type != PROTOBUF_C_TYPE_BYTES
                                      && field->type != PROTOBUF_C_TYPE_MESSAGE
                                  ? length / 64 + 1
                                  : 1;
          p += length;
          break;
        default:
          return wire_fail (budget, "a field has a wire type ONNX does not use");
        }
      if (budget->elements > MAX_ELEMENTS)
        return wire_fail (budget, "more than 4 million messages and strings");
    }
  return TRUE;
}

/* ---- Pass 1: values, nodes, constants. */

typedef struct
{
  int dtype; /* ONNX TensorProto.DataType */
  guint rank;
  gint64 shape[PLANNER_MAX_RANK];
  gint64 n;
  gint64 *i; /* the values as integers and as doubles; NULL when not loaded */
  double *f;
} Const;

typedef struct
{
  char *name;
  int producer;      /* node index, -1 for graph inputs and initializers */
  GArray *consumers; /* node indices, in node order, one entry per use */
  const Onnx__TensorProto *initializer;
  const Onnx__ValueInfoProto *input;
  gboolean is_output;
  Const *constant;
  /* Pass 3. */
  gboolean known;
  int dtype;
  guint rank;
  gint64 shape[PLANNER_MAX_RANK];
  int tensor; /* planner tensor id */
  int alias;  /* a value this one is the same tensor as (Identity, Dropout, same-type Cast) */
} Value;

typedef enum
{
  FUSED_NONE,
  FUSED_LINEAR,
  FUSED_RMS_NORM,
  FUSED_SILU,
  FUSED_GELU,
  FUSED_ROTARY,
  FUSED_SDPA,
} FusedKind;

typedef struct
{
  FusedKind kind;
  int inputs[3];
  guint n_inputs;
  int output;
  double eps, scale;
  int variant;
  gboolean causal, transpose_b;
  /* Rotary: the rotate-half slices (upper half negated), the cos value; RMSNorm: the mean;
   * attention: k and v as repeat_kv widens them to the query heads (or -1). */
  int check[3];
} Fused;

typedef struct
{
  const Onnx__NodeProto *proto;
  const char *op;
  guint n_in, n_out;
  int *in; /* value indices, -1 for an omitted optional input */
  int *out;
  int fused; /* index into Importer.fused when this node produces a claimed subgraph's output */
  gboolean claimed; /* inside a claimed subgraph (also true for its last node) */
  gboolean live;
} Node;

typedef struct
{
  const char *what;
  const char *folder;
  Onnx__ModelProto *model;
  const Onnx__GraphProto *graph;
  gint64 opset;
  GPtrArray *values; /* Value * */
  GHashTable *by_name;
  Node *nodes;
  guint n_nodes;
  GArray *fused; /* Fused */
  PlannerGraph *planner;
  gint64 batch, seq;
  gboolean used_batch, used_seq;
  GHashTable *names;    /* op and tensor names given out */
  GHashTable *suffixes; /* base name -> the next suffix unique_name() tries */
  guint64 folded;       /* elements folded so far, against MAX_FOLD_TOTAL */
  gint64 *heads;        /* per node: the heads of a Linear's output features (attrs.heads) */
  GError *error;
} Importer;

static gboolean G_GNUC_PRINTF (3, 4) fail (Importer *im, PlannerError code, const char *format, ...)
{
  va_list args;
  g_autofree char *message = NULL;

  if (im->error != NULL)
    return FALSE;
  va_start (args, format);
  message = g_strdup_vprintf (format, args);
  va_end (args);
  g_set_error (&im->error, PLANNER_ERROR, code, "%s: %s", im->what, message);
  return FALSE;
}

static const char *
node_label (const Node *node)
{
  return node->proto->name != NULL && node->proto->name[0] != '\0'
             ? node->proto->name
             : (node->n_out > 0 && node->proto->output[0] != NULL ? node->proto->output[0] : "?");
}

static Value *
value_at (Importer *im, int v)
{
  return g_ptr_array_index (im->values, v);
}

static void
const_free (Const *c)
{
  if (c == NULL)
    return;
  g_free (c->i);
  g_free (c->f);
  g_free (c);
}

static void
value_free (gpointer data)
{
  Value *v = data;

  g_free (v->name);
  g_array_unref (v->consumers);
  const_free (v->constant);
  g_free (v);
}

static int
value_add (Importer *im, const char *name)
{
  Value *v = g_new0 (Value, 1);

  v->name = g_strdup (name);
  v->producer = -1;
  v->consumers = g_array_new (FALSE, FALSE, sizeof (int));
  v->tensor = -1;
  v->alias = -1;
  g_ptr_array_add (im->values, v);
  g_hash_table_insert (im->by_name, v->name, GINT_TO_POINTER (im->values->len));
  return im->values->len - 1;
}

static int
value_find (Importer *im, const char *name)
{
  return GPOINTER_TO_INT (g_hash_table_lookup (im->by_name, name)) - 1;
}

static gboolean
dtype_is_float (int dtype)
{
  return dtype == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT
         || dtype == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16
         || dtype == ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16
         || dtype == ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE;
}

/* Bytes per element of the types whose data we decode; 0 for the others. */
static guint
dtype_bytes (int dtype)
{
  switch (dtype)
    {
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT:
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT32:
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT32:
      return 4;
    case ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE:
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT64:
      return 8;
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16:
    case ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16:
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT16:
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT16:
      return 2;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT8:
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT8:
    case ONNX__TENSOR_PROTO__DATA_TYPE__BOOL:
      return 1;
    default:
      return 0;
    }
}

static const char *
dtype_name (int dtype)
{
  static const char *const names[] = {
    "undefined", "float",  "uint8",     "int8",       "uint16",   "int16",
    "int32",     "int64",  "string",    "bool",       "float16",  "double",
    "uint32",    "uint64", "complex64", "complex128", "bfloat16",
  };

  return dtype >= 0 && dtype < (int)G_N_ELEMENTS (names) ? names[dtype] : "a newer type";
}

static gboolean
planner_dtype_of (int dtype, PlannerDType *out)
{
  switch (dtype)
    {
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT:
      *out = PLANNER_DTYPE_F32;
      return TRUE;
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16:
      *out = PLANNER_DTYPE_F16;
      return TRUE;
    case ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16:
      *out = PLANNER_DTYPE_BF16;
      return TRUE;
    /* Token ids come as int64 or int32; the planner has one integer type. */
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT64:
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT32:
      *out = PLANNER_DTYPE_I64;
      return TRUE;
    default:
      return FALSE;
    }
}

static int
onnx_dtype_of (PlannerDType dtype)
{
  switch (dtype)
    {
    case PLANNER_DTYPE_F32:
      return ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    case PLANNER_DTYPE_F16:
      return ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16;
    case PLANNER_DTYPE_BF16:
      return ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16;
    default:
      return ONNX__TENSOR_PROTO__DATA_TYPE__INT64;
    }
}

static double
half_to_double (guint16 h, gboolean bf16)
{
  if (bf16)
    {
      guint32 bits = (guint32)h << 16;
      float f;

      memcpy (&f, &bits, sizeof f);
      return f;
    }
  int exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
  double value = exponent == 0    ? ldexp (mantissa, -24)
                 : exponent == 31 ? (mantissa ? NAN : INFINITY)
                                  : ldexp (mantissa + 1024, exponent - 25);
  return (h & 0x8000) ? -value : value;
}

static gint64
double_to_int (double d)
{
  if (!(d == d))
    return 0;
  if (d >= 9.2e18)
    return G_MAXINT64;
  if (d <= -9.2e18)
    return G_MININT64;
  return (gint64)d;
}

static Const *
const_new (int dtype, guint rank, const gint64 *shape, gint64 n)
{
  Const *c = g_new0 (Const, 1);

  c->dtype = dtype;
  c->rank = rank;
  if (rank > 0)
    memcpy (c->shape, shape, rank * sizeof *shape);
  c->n = n;
  if (n <= MAX_FOLD)
    {
      c->i = g_new0 (gint64, MAX (n, 1));
      c->f = g_new0 (double, MAX (n, 1));
    }
  return c;
}

/* Element @k of little-endian @bytes of type @dtype, into c->i/c->f. */
static void
const_set_raw (Const *c, gint64 k, const guint8 *bytes)
{
  guint64 u = 0;
  guint size = dtype_bytes (c->dtype);

  for (guint b = 0; b < size; b++)
    u |= (guint64)bytes[b] << (8 * b);
  switch (c->dtype)
    {
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT:
      {
        guint32 bits = u;
        float f;

        memcpy (&f, &bits, sizeof f);
        c->f[k] = f;
        c->i[k] = double_to_int (f);
        return;
      }
    case ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE:
      memcpy (&c->f[k], &u, sizeof (double));
      c->i[k] = double_to_int (c->f[k]);
      return;
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16:
    case ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16:
      c->f[k] = half_to_double (u, c->dtype == ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16);
      c->i[k] = double_to_int (c->f[k]);
      return;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT64:
      c->i[k] = (gint64)u;
      break;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT32:
      c->i[k] = (gint32)(guint32)u;
      break;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT16:
      c->i[k] = (gint16)(guint16)u;
      break;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT8:
      c->i[k] = (gint8)(guint8)u;
      break;
    default:
      c->i[k] = (gint64)u;
      break;
    }
  c->f[k] = (double)c->i[k];
}

static gboolean
tensor_shape (Importer *im, const Onnx__TensorProto *t, const char *label, guint *rank,
              gint64 *shape, gint64 *n)
{
  *n = 1;
  if (t->n_dims > PLANNER_MAX_RANK)
    return fail (im, PLANNER_ERROR_SHAPE_MISMATCH,
                 "tensor %s has %zu dims; at most %d are supported", label, t->n_dims,
                 PLANNER_MAX_RANK);
  *rank = t->n_dims;
  for (guint d = 0; d < t->n_dims; d++)
    {
      if (t->dims[d] < 0 || t->dims[d] > MAX_DIM)
        return fail (im, PLANNER_ERROR_SHAPE_MISMATCH,
                     "tensor %s: dim %u is %" G_GINT64_FORMAT "; sizes are 0 to 2^31 - 1", label, d,
                     (gint64)t->dims[d]);
      shape[d] = t->dims[d];
      if (shape[d] != 0 && *n > MAX_NUMEL / shape[d])
        return fail (im, PLANNER_ERROR_SHAPE_MISMATCH, "tensor %s has more than 2^62 elements",
                     label);
      *n *= shape[d];
    }
  return TRUE;
}

/* External data: a file named relative to the model's folder, never outside it. Returns the
 * bytes [offset, offset + length) of it, or NULL with the error set. */
static GBytes *
external_data (Importer *im, const Onnx__TensorProto *t, const char *label, gsize want)
{
  const char *location = NULL;
  guint64 offset = 0, length = G_MAXUINT64;

  for (guint k = 0; k < t->n_external_data; k++)
    {
      const Onnx__StringStringEntryProto *e = t->external_data[k];
      const char *key = e->key != NULL ? e->key : "", *value = e->value != NULL ? e->value : "";
      guint64 *target = g_str_equal (key, "offset")   ? &offset
                        : g_str_equal (key, "length") ? &length
                                                      : NULL;

      if (g_str_equal (key, "location"))
        location = value;
      else if (target != NULL
               && !g_ascii_string_to_unsigned (value, 10, 0, G_MAXINT64, target, NULL))
        return fail (im, PLANNER_ERROR_MALFORMED_FILE,
                     "tensor %s: external data %s \"%s\" is not a number", label, key, value),
               NULL;
    }
  if (location == NULL || location[0] == '\0')
    return fail (im, PLANNER_ERROR_MALFORMED_FILE, "tensor %s: external data without a location",
                 label),
           NULL;
  if (im->folder == NULL)
    return fail (im, PLANNER_ERROR_MALFORMED_FILE,
                 "tensor %s: external data (\"%s\") needs the model's folder; open the .onnx file "
                 "from disk",
                 label, location),
           NULL;
  {
    g_auto (GStrv) parts = g_strsplit_set (location, "/\\", -1);

    if (g_path_is_absolute (location) || strchr (location, ':') != NULL)
      return fail (im, PLANNER_ERROR_MALFORMED_FILE,
                   "tensor %s: external data location \"%s\" is not relative to the model's folder",
                   label, location),
             NULL;
    for (guint k = 0; parts[k] != NULL; k++)
      if (g_str_equal (parts[k], ".."))
        return fail (im, PLANNER_ERROR_MALFORMED_FILE,
                     "tensor %s: external data location \"%s\" leads outside the model's folder",
                     label, location),
               NULL;
  }
  if (want == 0)
    return g_bytes_new (NULL, 0); /* checked, not read */

  g_autofree char *path = g_build_filename (im->folder, location, NULL);
  g_autofree char *real = realpath (path, NULL);
  g_autofree char *real_folder = realpath (im->folder, NULL);
  g_autofree char *prefix
      = real_folder != NULL ? g_strconcat (real_folder, G_DIR_SEPARATOR_S, NULL) : NULL;
  g_autoptr (GMappedFile) file = NULL;
  g_autoptr (GError) local = NULL;

  if (real == NULL || prefix == NULL || !g_str_has_prefix (real, prefix))
    return fail (im, PLANNER_ERROR_MALFORMED_FILE, "tensor %s: external data file \"%s\" %s", label,
                 location,
                 real == NULL ? "does not exist" : "lies outside the model's folder (a link)"),
           NULL;
  file = g_mapped_file_new (real, FALSE, &local);
  if (file == NULL)
    return fail (im, PLANNER_ERROR_IO, "tensor %s: %s", label, local->message), NULL;
  if (length == G_MAXUINT64)
    length = want;
  if (length != want || offset > g_mapped_file_get_length (file)
      || length > g_mapped_file_get_length (file) - offset)
    return fail (im, PLANNER_ERROR_MALFORMED_FILE,
                 "tensor %s: external data [%" G_GUINT64_FORMAT ", +%" G_GUINT64_FORMAT
                 ") does not hold its %zu bytes inside \"%s\"",
                 label, offset, length, want, location),
           NULL;
  return g_bytes_new ((const guint8 *)g_mapped_file_get_contents (file) + offset, length);
}

/* A TensorProto as a constant: its shape always, its data when it has at most MAX_FOLD
 * elements of a type we decode. */
static Const *
const_from_tensor (Importer *im, const Onnx__TensorProto *t, const char *label)
{
  guint rank = 0;
  gint64 shape[PLANNER_MAX_RANK], n;
  Const *c;
  int dtype = t->has_data_type ? t->data_type : 0;
  gboolean external
      = t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;

  if (!tensor_shape (im, t, label, &rank, shape, &n))
    return NULL;
  c = const_new (dtype, rank, shape, n);
  if (c->i == NULL || dtype_bytes (dtype) == 0)
    {
      /* Shape only; an external location is still checked. */
      g_autoptr (GBytes) checked = external ? external_data (im, t, label, 0) : NULL;

      if (external && checked == NULL)
        return const_free (c), NULL;
      g_clear_pointer (&c->i, g_free);
      g_clear_pointer (&c->f, g_free);
      return c;
    }

  gsize bytes = (gsize)n * dtype_bytes (dtype);
  g_autoptr (GBytes) ext = external ? external_data (im, t, label, bytes) : NULL;

  if (external && ext == NULL)
    return const_free (c), NULL;
  if (ext != NULL || t->has_raw_data)
    {
      gsize size = 0;
      const guint8 *raw = ext != NULL ? g_bytes_get_data (ext, &size) : t->raw_data.data;

      if (ext == NULL)
        size = t->raw_data.len;
      if (size != bytes)
        return fail (im, PLANNER_ERROR_MALFORMED_FILE,
                     "tensor %s: %zu bytes of data for %" G_GINT64_FORMAT " elements of %s", label,
                     size, n, dtype_name (dtype)),
               const_free (c), NULL;
      for (gint64 k = 0; k < n; k++)
        const_set_raw (c, k, raw + k * dtype_bytes (dtype));
      return c;
    }

  /* Typed fields: float_data, int64_data, double_data, or int32_data for the small types. */
  gsize have = dtype == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT    ? t->n_float_data
               : dtype == ONNX__TENSOR_PROTO__DATA_TYPE__INT64  ? t->n_int64_data
               : dtype == ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE ? t->n_double_data
               : dtype == ONNX__TENSOR_PROTO__DATA_TYPE__UINT32 ? t->n_uint64_data
                                                                : t->n_int32_data;
  if (have != (gsize)n)
    return fail (im, PLANNER_ERROR_MALFORMED_FILE,
                 "tensor %s: %zu values for %" G_GINT64_FORMAT " elements", label, have, n),
           const_free (c), NULL;
  for (gint64 k = 0; k < n; k++)
    {
      switch (dtype)
        {
        case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT:
          c->f[k] = t->float_data[k];
          c->i[k] = double_to_int (c->f[k]);
          continue;
        case ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE:
          c->f[k] = t->double_data[k];
          c->i[k] = double_to_int (c->f[k]);
          continue;
        case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16:
        case ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16:
          c->f[k]
              = half_to_double (t->int32_data[k], dtype == ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16);
          c->i[k] = double_to_int (c->f[k]);
          continue;
        case ONNX__TENSOR_PROTO__DATA_TYPE__INT64:
          c->i[k] = t->int64_data[k];
          break;
        case ONNX__TENSOR_PROTO__DATA_TYPE__UINT32:
          c->i[k] = (gint64)MIN (t->uint64_data[k], (guint64)G_MAXINT64);
          break;
        default:
          c->i[k] = t->int32_data[k];
          break;
        }
      c->f[k] = (double)c->i[k];
    }
  return c;
}

static const Onnx__AttributeProto *
attr_find (const Node *node, const char *name)
{
  if (name == NULL)
    return NULL;
  for (guint k = 0; k < node->proto->n_attribute; k++)
    if (node->proto->attribute[k]->name != NULL
        && g_str_equal (node->proto->attribute[k]->name, name))
      return node->proto->attribute[k];
  return NULL;
}

static gint64
attr_int (const Node *node, const char *name, gint64 fallback)
{
  const Onnx__AttributeProto *a = attr_find (node, name);

  return a != NULL && a->has_i ? a->i : fallback;
}

static double
attr_float (const Node *node, const char *name, double fallback)
{
  const Onnx__AttributeProto *a = attr_find (node, name);

  return a != NULL && a->has_f ? a->f : fallback;
}

static const char *
attr_string (const Node *node, const char *name, const char *fallback, char *buffer, gsize size)
{
  const Onnx__AttributeProto *a = attr_find (node, name);

  if (a == NULL || !a->has_s)
    return fallback;
  g_strlcpy (buffer, (const char *)a->s.data, MIN (size, a->s.len + 1));
  return buffer;
}

/* The value of a Constant node. */
static Const *
const_of_constant_node (Importer *im, const Node *node)
{
  const Onnx__AttributeProto *a;
  Const *c;

  if ((a = attr_find (node, "value")) != NULL && a->t != NULL)
    return const_from_tensor (im, a->t, node_label (node));
  if ((a = attr_find (node, "value_float")) != NULL && a->has_f)
    {
      c = const_new (ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 0, NULL, 1);
      c->f[0] = a->f;
      c->i[0] = double_to_int (a->f);
      return c;
    }
  if ((a = attr_find (node, "value_int")) != NULL && a->has_i)
    {
      c = const_new (ONNX__TENSOR_PROTO__DATA_TYPE__INT64, 0, NULL, 1);
      c->i[0] = a->i;
      c->f[0] = (double)a->i;
      return c;
    }
  if (((a = attr_find (node, "value_ints")) != NULL && a->n_ints > 0)
      || ((a = attr_find (node, "value_floats")) != NULL && a->n_floats > 0))
    {
      gboolean ints = a->n_ints > 0;
      gint64 n = ints ? a->n_ints : a->n_floats;

      if (n > MAX_FOLD)
        return fail (im, PLANNER_ERROR_MALFORMED_FILE, "Constant %s holds more than %d values",
                     node_label (node), MAX_FOLD),
               NULL;
      c = const_new (ints ? ONNX__TENSOR_PROTO__DATA_TYPE__INT64
                          : ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT,
                     1, &n, n);
      for (gint64 k = 0; k < n; k++)
        {
          c->f[k] = ints ? (double)a->ints[k] : a->floats[k];
          c->i[k] = ints ? a->ints[k] : double_to_int (a->floats[k]);
        }
      return c;
    }
  return fail (im, PLANNER_ERROR_MALFORMED_FILE,
               "Constant %s has no value, value_float, value_int, value_ints or value_floats",
               node_label (node)),
         NULL;
}

/* Names become op and tensor names, which every text format writes: UTF-8 only. */
static gboolean
check_names (Importer *im)
{
  const Onnx__GraphProto *g = im->graph;
  const char *bad = NULL;

  for (guint k = 0; k < g->n_initializer && bad == NULL; k++)
    if (g->initializer[k]->name != NULL && !g_utf8_validate (g->initializer[k]->name, -1, NULL))
      bad = "an initializer";
  for (guint k = 0; k < g->n_input && bad == NULL; k++)
    if (g->input[k]->name != NULL && !g_utf8_validate (g->input[k]->name, -1, NULL))
      bad = "a graph input";
  for (guint k = 0; k < g->n_output && bad == NULL; k++)
    if (g->output[k]->name != NULL && !g_utf8_validate (g->output[k]->name, -1, NULL))
      bad = "a graph output";
  for (guint k = 0; k < g->n_node && bad == NULL; k++)
    {
      const Onnx__NodeProto *node = g->node[k];

      if ((node->name != NULL && !g_utf8_validate (node->name, -1, NULL))
          || (node->op_type != NULL && !g_utf8_validate (node->op_type, -1, NULL))
          || (node->domain != NULL && !g_utf8_validate (node->domain, -1, NULL)))
        bad = "a node";
      for (guint i = 0; i < node->n_input && bad == NULL; i++)
        if (node->input[i] != NULL && !g_utf8_validate (node->input[i], -1, NULL))
          bad = "a node input";
      for (guint o = 0; o < node->n_output && bad == NULL; o++)
        if (node->output[o] != NULL && !g_utf8_validate (node->output[o], -1, NULL))
          bad = "a node output";
    }
  if (bad != NULL)
    return fail (im, PLANNER_ERROR_MALFORMED_FILE, "the name of %s is not UTF-8", bad);
  return TRUE;
}

static gboolean
read_graph (Importer *im)
{
  const Onnx__GraphProto *g = im->graph;

  if (!check_names (im))
    return FALSE;

  if (g->n_node > MAX_NODES)
    return fail (im, PLANNER_ERROR_MALFORMED_FILE, "%zu nodes; at most %u are supported", g->n_node,
                 MAX_NODES);
  for (guint k = 0; k < g->n_initializer; k++)
    {
      const Onnx__TensorProto *t = g->initializer[k];
      const char *name = t->name != NULL ? t->name : "";
      int v;

      if (name[0] == '\0' || value_find (im, name) >= 0)
        return fail (im, PLANNER_ERROR_INVALID_GRAPH, "initializer %d is %s", k,
                     name[0] == '\0' ? "unnamed" : "named twice");
      v = value_add (im, name);
      value_at (im, v)->initializer = t;
      if ((value_at (im, v)->constant = const_from_tensor (im, t, name)) == NULL)
        return FALSE;
    }
  for (guint k = 0; k < g->n_input; k++)
    {
      const char *name = g->input[k]->name != NULL ? g->input[k]->name : "";
      int v = value_find (im, name);

      if (name[0] == '\0')
        return fail (im, PLANNER_ERROR_INVALID_GRAPH, "graph input %u is unnamed", k);
      /* Files of IR version 3 list their initializers as inputs too. */
      if (v >= 0 && value_at (im, v)->initializer != NULL)
        continue;
      if (v >= 0)
        return fail (im, PLANNER_ERROR_INVALID_GRAPH, "graph input %s is listed twice", name);
      value_at (im, value_add (im, name))->input = g->input[k];
    }

  im->n_nodes = g->n_node;
  im->nodes = g_new0 (Node, MAX (im->n_nodes, 1));
  for (guint k = 0; k < im->n_nodes; k++)
    {
      Node *node = &im->nodes[k];

      node->proto = g->node[k];
      node->op = node->proto->op_type != NULL ? node->proto->op_type : "";
      node->fused = -1;
      node->n_in = node->proto->n_input;
      node->n_out = node->proto->n_output;
      node->in = g_new (int, MAX (node->n_in, 1));
      node->out = g_new (int, MAX (node->n_out, 1));
      for (guint i = 0; i < node->n_in; i++)
        {
          const char *name = node->proto->input[i] != NULL ? node->proto->input[i] : "";

          node->in[i] = name[0] == '\0' ? -1 : value_find (im, name);
          if (name[0] != '\0' && node->in[i] < 0)
            return fail (im, PLANNER_ERROR_INVALID_GRAPH,
                         "node %s (%s): input \"%s\" is not produced before it (ONNX lists nodes "
                         "in topological order)",
                         node_label (node), node->op, name);
          if (node->in[i] >= 0)
            g_array_append_val (value_at (im, node->in[i])->consumers, k);
        }
      for (guint o = 0; o < node->n_out; o++)
        {
          const char *name = node->proto->output[o] != NULL ? node->proto->output[o] : "";

          if (name[0] != '\0' && value_find (im, name) >= 0)
            return fail (im, PLANNER_ERROR_INVALID_GRAPH,
                         "node %s (%s): output \"%s\" is produced twice", node_label (node),
                         node->op, name);
          node->out[o] = name[0] == '\0' ? -1 : value_add (im, name);
          if (node->out[o] >= 0)
            value_at (im, node->out[o])->producer = k;
        }
      if (g_str_equal (node->op, "Constant") && node->n_out == 1 && node->out[0] >= 0)
        if ((value_at (im, node->out[0])->constant = const_of_constant_node (im, node)) == NULL)
          return FALSE;
    }
  if (g->n_output == 0)
    return fail (im, PLANNER_ERROR_INVALID_GRAPH, "the graph has no outputs");
  for (guint k = 0; k < g->n_output; k++)
    {
      int v = value_find (im, g->output[k]->name != NULL ? g->output[k]->name : "");

      if (v < 0)
        return fail (im, PLANNER_ERROR_INVALID_GRAPH, "graph output \"%s\" is produced by no node",
                     g->output[k]->name != NULL ? g->output[k]->name : "");
      value_at (im, v)->is_output = TRUE;
    }
  return TRUE;
}

static char *module_path (const Node *node, const char **last);

/* ---- Pass 2: claiming the subgraphs of one module. */

/* The node that makes @v, or -1 (a graph input, an initializer, an omitted input). */
static int
producer_of (Importer *im, int v)
{
  return v >= 0 ? value_at (im, v)->producer : -1;
}

static int
producer_op (Importer *im, int v, const char *op)
{
  if (v < 0)
    return -1;
  int p = value_at (im, v)->producer;

  return p >= 0 && !im->nodes[p].claimed && g_str_equal (im->nodes[p].op, op) ? p : -1;
}

/* The one node that uses @v, when it is @op (NULL: any) and unclaimed. */
static int
only_consumer (Importer *im, int v, const char *op)
{
  const Value *value;

  if (v < 0)
    return -1;
  value = value_at (im, v);
  if (value->consumers->len != 1 || value->is_output)
    return -1;
  int c = g_array_index (value->consumers, int, 0);

  return !im->nodes[c].claimed && (op == NULL || g_str_equal (im->nodes[c].op, op)) ? c : -1;
}

static int
out0 (Importer *im, int node)
{
  return node >= 0 && im->nodes[node].n_out >= 1 ? im->nodes[node].out[0] : -1;
}

static int
in_at (Importer *im, int node, guint i)
{
  return node >= 0 && i < im->nodes[node].n_in ? im->nodes[node].in[i] : -1;
}

/* The operand of binary @node that is not @v, or -1 when @v is neither. */
static int
other_operand (Importer *im, int node, int v)
{
  if (node < 0 || im->nodes[node].n_in != 2)
    return -1;
  if (im->nodes[node].in[0] == v)
    return im->nodes[node].in[1];
  if (im->nodes[node].in[1] == v)
    return im->nodes[node].in[0];
  return -1;
}

static gboolean
const_scalar (Importer *im, int v, double *out)
{
  const Const *c = v >= 0 ? value_at (im, v)->constant : NULL;

  if (c == NULL || c->n != 1 || c->f == NULL)
    return FALSE;
  *out = c->f[0];
  return TRUE;
}

static gboolean
is_const_scalar (Importer *im, int v, double want, double tolerance)
{
  double d;

  return const_scalar (im, v, &d) && fabs (d - want) <= tolerance * fabs (want);
}

static gboolean
is_parameter (Importer *im, int v, guint rank)
{
  return v >= 0 && value_at (im, v)->initializer != NULL
         && value_at (im, v)->constant->rank == rank;
}

static gboolean
is_alias_op (const char *op)
{
  return g_str_equal (op, "Cast") || g_str_equal (op, "Identity") || g_str_equal (op, "Dropout");
}

/* Follows @v forward through single-use Cast, Identity and Dropout nodes, adding them to @set. */
static int
skip_casts_forward (Importer *im, int v, GArray *set)
{
  int c;

  while ((c = only_consumer (im, v, NULL)) >= 0 && is_alias_op (im->nodes[c].op)
         && im->nodes[c].in[0] == v)
    {
      g_array_append_val (set, c);
      v = out0 (im, c);
    }
  return v;
}

/* Claims @set (node indices) as one op whose output is @carrier's first output, when nothing
 * outside the set uses what the other nodes produce. */
static gboolean
claim (Importer *im, GArray *set, int carrier, const Fused *fused)
{
  if (out0 (im, carrier) < 0)
    return FALSE;
  for (guint i = 0; i < fused->n_inputs; i++)
    if (fused->inputs[i] < 0)
      return FALSE;
  for (guint k = 0; k < set->len; k++)
    {
      int n = g_array_index (set, int, k);

      if (n < 0 || im->nodes[n].claimed)
        return FALSE;
      for (guint k2 = 0; k2 < k; k2++)
        if (g_array_index (set, int, k2) == n)
          return FALSE;
      if (n == carrier)
        continue;
      for (guint o = 0; o < im->nodes[n].n_out; o++)
        {
          int v = im->nodes[n].out[o];

          if (v < 0)
            continue;
          if (value_at (im, v)->is_output)
            return FALSE;
          for (guint u = 0; u < value_at (im, v)->consumers->len; u++)
            {
              int user = g_array_index (value_at (im, v)->consumers, int, u);
              /* Shape arithmetic may read an intermediate's shape: the op provides it. */
              gboolean inside
                  = fused->kind == FUSED_SDPA && g_str_equal (im->nodes[user].op, "Shape");

              for (guint k2 = 0; k2 < set->len && !inside; k2++)
                inside = g_array_index (set, int, k2) == user;
              if (!inside)
                return FALSE;
            }
        }
    }
  for (guint k = 0; k < set->len; k++)
    im->nodes[g_array_index (set, int, k)].claimed = TRUE;
  im->nodes[carrier].fused = im->fused->len;
  g_array_append_val (im->fused, *fused);
  g_array_index (im->fused, Fused, im->fused->len - 1).output = out0 (im, carrier);
  return TRUE;
}

static void
fused_init (Fused *f, FusedKind kind)
{
  memset (f, 0, sizeof *f);
  f->kind = kind;
  f->check[0] = f->check[1] = f->check[2] = -1;
}

static void
fused_input (Fused *f, int v)
{
  g_assert (f->n_inputs < G_N_ELEMENTS (f->inputs));
  f->inputs[f->n_inputs++] = v;
}

#define SET_NEW() g_autoptr (GArray) set = g_array_new (FALSE, FALSE, sizeof (int))
#define SET_ADD(n)                                                                                 \
  G_STMT_START                                                                                     \
  {                                                                                                \
    int n_ = (n);                                                                                  \
    g_array_append_val (set, n_);                                                                  \
  }                                                                                                \
  G_STMT_END

/* HF's LlamaRMSNorm as exported: w * cast(x * 1/sqrt(mean(x^2) + eps)), with the reciprocal
 * as Reciprocal, Div(1, .) or a Div of x itself. @p is the Pow. */
static void
match_rms_norm (Importer *im, int p)
{
  SET_NEW ();
  Fused f;
  int x = in_at (im, p, 0), mean, add, sq, r, scaled, v, w_mul;
  double eps;

  fused_init (&f, FUSED_RMS_NORM);
  if (!is_const_scalar (im, in_at (im, p, 1), 2.0, 0))
    return;
  SET_ADD (p);
  if ((mean = only_consumer (im, out0 (im, p), "ReduceMean")) < 0)
    return;
  SET_ADD (mean);
  if ((add = only_consumer (im, out0 (im, mean), "Add")) < 0
      || !const_scalar (im, other_operand (im, add, out0 (im, mean)), &eps) || !(eps > 0))
    return;
  SET_ADD (add);
  if ((sq = only_consumer (im, out0 (im, add), "Sqrt")) < 0)
    return;
  SET_ADD (sq);
  if ((r = only_consumer (im, out0 (im, sq), NULL)) < 0)
    return;
  SET_ADD (r);
  if (g_str_equal (im->nodes[r].op, "Div") && in_at (im, r, 0) == x
      && in_at (im, r, 1) == out0 (im, sq))
    scaled = r;
  else
    {
      if (!(g_str_equal (im->nodes[r].op, "Reciprocal")
            || (g_str_equal (im->nodes[r].op, "Div")
                && is_const_scalar (im, in_at (im, r, 0), 1.0, 0)
                && in_at (im, r, 1) == out0 (im, sq))))
        return;
      if ((scaled = only_consumer (im, out0 (im, r), "Mul")) < 0
          || other_operand (im, scaled, out0 (im, r)) != x)
        return;
      SET_ADD (scaled);
    }
  v = skip_casts_forward (im, out0 (im, scaled), set);
  if ((w_mul = only_consumer (im, v, "Mul")) < 0
      || !is_parameter (im, other_operand (im, w_mul, v), 1))
    return;
  SET_ADD (w_mul);
  f.eps = eps;
  f.check[0] = mean;
  fused_input (&f, x);
  fused_input (&f, other_operand (im, w_mul, v));
  claim (im, set, w_mul, &f);
}

/* x * sigmoid(x). @s is the Sigmoid. */
static void
match_silu (Importer *im, int s)
{
  SET_NEW ();
  Fused f;
  int x = in_at (im, s, 0), m = only_consumer (im, out0 (im, s), "Mul");

  if (m < 0 || other_operand (im, m, out0 (im, s)) != x)
    return;
  SET_ADD (s);
  SET_ADD (m);
  fused_init (&f, FUSED_SILU);
  fused_input (&f, x);
  claim (im, set, m, &f);
}

/* The end of both GeLU forms: (1 + t) times x and 0.5, in any grouping. Returns the last
 * node, or -1. */
static int
match_gelu_tail (Importer *im, int t_out, int x, GArray *set)
{
  int add = only_consumer (im, t_out, "Add"), m1, m2, o;

  if (add < 0 || !is_const_scalar (im, other_operand (im, add, t_out), 1.0, 1e-6))
    return -1;
  SET_ADD (add);
  if ((m1 = only_consumer (im, out0 (im, add), "Mul")) < 0)
    return -1;
  SET_ADD (m1);
  o = other_operand (im, m1, out0 (im, add));
  if (o == x)
    {
      /* ((1 + t) * x) * 0.5 */
      if ((m2 = only_consumer (im, out0 (im, m1), "Mul")) < 0
          || !is_const_scalar (im, other_operand (im, m2, out0 (im, m1)), 0.5, 1e-6))
        return -1;
      SET_ADD (m2);
      return m2;
    }
  if (is_const_scalar (im, o, 0.5, 1e-6))
    {
      /* ((1 + t) * 0.5) * x */
      if ((m2 = only_consumer (im, out0 (im, m1), "Mul")) < 0
          || other_operand (im, m2, out0 (im, m1)) != x)
        return -1;
      SET_ADD (m2);
      return m2;
    }
  /* (x * 0.5) * (1 + t) */
  int half = producer_op (im, o, "Mul");

  if (half < 0 || other_operand (im, half, x) < 0
      || !is_const_scalar (im, other_operand (im, half, x), 0.5, 1e-6))
    return -1;
  SET_ADD (half);
  return m1;
}

/* 0.5 x (1 + erf(x / sqrt 2)). @e is the Erf. */
static void
match_gelu_erf (Importer *im, int e)
{
  SET_NEW ();
  Fused f;
  int scale = producer_of (im, in_at (im, e, 0)), x = -1, last;

  if (scale < 0 || im->nodes[scale].claimed || im->nodes[scale].n_in != 2)
    return;
  if (g_str_equal (im->nodes[scale].op, "Div")
      && is_const_scalar (im, in_at (im, scale, 1), G_SQRT2, 1e-5))
    x = in_at (im, scale, 0);
  else if (g_str_equal (im->nodes[scale].op, "Mul"))
    for (guint i = 0; i < 2 && x < 0; i++)
      if (is_const_scalar (im, in_at (im, scale, i), 1 / G_SQRT2, 1e-5))
        x = in_at (im, scale, 1 - i);
  if (x < 0)
    return;
  SET_ADD (scale);
  SET_ADD (e);
  if ((last = match_gelu_tail (im, out0 (im, e), x, set)) < 0)
    return;
  fused_init (&f, FUSED_GELU);
  fused_input (&f, x);
  claim (im, set, last, &f);
}

/* 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). @t is the Tanh. */
static void
match_gelu_tanh (Importer *im, int t)
{
  SET_NEW ();
  Fused f;
  int outer = producer_op (im, in_at (im, t, 0), "Mul"), inner = -1, x = -1, cube_mul, pow, last;

  if (outer < 0)
    return;
  for (guint i = 0; i < 2 && inner < 0; i++)
    if (is_const_scalar (im, in_at (im, outer, i), sqrt (2 / G_PI), 1e-4))
      inner = producer_op (im, in_at (im, outer, 1 - i), "Add");
  if (inner < 0)
    return;
  for (guint i = 0; i < 2 && x < 0; i++)
    {
      cube_mul = producer_op (im, in_at (im, inner, 1 - i), "Mul");
      for (guint j = 0; cube_mul >= 0 && j < 2 && x < 0; j++)
        if (is_const_scalar (im, in_at (im, cube_mul, j), 0.044715, 1e-4)
            && (pow = producer_op (im, in_at (im, cube_mul, 1 - j), "Pow")) >= 0
            && in_at (im, pow, 0) == in_at (im, inner, i)
            && is_const_scalar (im, in_at (im, pow, 1), 3.0, 0))
          x = in_at (im, inner, i);
    }
  if (x < 0)
    return;
  SET_ADD (pow);
  SET_ADD (cube_mul);
  SET_ADD (inner);
  SET_ADD (outer);
  SET_ADD (t);
  if ((last = match_gelu_tail (im, out0 (im, t), x, set)) < 0)
    return;
  fused_init (&f, FUSED_GELU);
  f.variant = 1;
  fused_input (&f, x);
  claim (im, set, last, &f);
}

/* HF's apply_rotary_pos_emb: x * cos + cat(-x2, x1) * sin, x1 and x2 the halves of the last
 * dim. @n is the Neg. */
static void
match_rotary (Importer *im, int n)
{
  SET_NEW ();
  Fused f;
  int hi = producer_op (im, in_at (im, n, 0), "Slice"), x = in_at (im, hi, 0), cat, lo, m_sin, add,
      m_cos, cos = -1;

  if (hi < 0 || (cat = only_consumer (im, out0 (im, n), "Concat")) < 0 || im->nodes[cat].n_in != 2
      || in_at (im, cat, 0) != out0 (im, n)
      || (lo = producer_op (im, in_at (im, cat, 1), "Slice")) < 0 || in_at (im, lo, 0) != x)
    return;
  if ((m_sin = only_consumer (im, out0 (im, cat), "Mul")) < 0
      || (add = only_consumer (im, out0 (im, m_sin), "Add")) < 0
      || (m_cos = producer_op (im, other_operand (im, add, out0 (im, m_sin)), "Mul")) < 0
      || (cos = other_operand (im, m_cos, x)) < 0)
    return;
  SET_ADD (hi);
  SET_ADD (n);
  SET_ADD (lo);
  SET_ADD (cat);
  SET_ADD (m_sin);
  SET_ADD (m_cos);
  SET_ADD (add);
  fused_init (&f, FUSED_ROTARY);
  f.check[0] = hi;
  f.check[1] = lo;
  f.check[2] = cos;
  fused_input (&f, x);
  claim (im, set, add, &f);
}

/* HF's repeat_kv (GQA): Reshape(Expand(Unsqueeze(k, 2))), claimed into the attention: the
 * SDPA rule maps each group of query heads onto its kv head itself. */
static int
skip_repeat_kv (Importer *im, int v, GArray *set)
{
  int r = producer_op (im, v, "Reshape"), e = producer_op (im, in_at (im, r, 0), "Expand"),
      u = producer_op (im, in_at (im, e, 0), "Unsqueeze");

  if (r < 0 || e < 0 || u < 0)
    return v;
  SET_ADD (r);
  SET_ADD (e);
  SET_ADD (u);
  return in_at (im, u, 0);
}

/* Whether an attention mask is causal: built by a triangle or a comparison of positions, or a
 * constant that is 0 on and below the diagonal and very negative above it. A mask computed
 * from attention_mask alone (padding) is not. */
static gboolean
mask_is_causal (Importer *im, int mask)
{
  g_autoptr (GArray) stack = g_array_new (FALSE, FALSE, sizeof (int));
  g_autoptr (GHashTable) seen = g_hash_table_new (NULL, NULL);
  static const char *const causal_ops[]
      = { "Trilu", "Less", "LessOrEqual", "Greater", "GreaterOrEqual" };

  if (mask < 0)
    return FALSE;
  g_array_append_val (stack, mask);
  while (stack->len > 0 && g_hash_table_size (seen) < 4096)
    {
      int v = g_array_index (stack, int, stack->len - 1);
      const Value *value = value_at (im, v);

      g_array_set_size (stack, stack->len - 1);
      if (g_hash_table_contains (seen, GINT_TO_POINTER (v + 1)))
        continue;
      g_hash_table_add (seen, GINT_TO_POINTER (v + 1));
      if (value->constant != NULL && value->constant->f != NULL && value->constant->rank >= 2)
        {
          const Const *c = value->constant;
          gint64 rows = c->shape[c->rank - 2], cols = c->shape[c->rank - 1];
          gboolean causal = rows > 1 && rows == cols;

          for (gint64 k = 0; causal && k < c->n; k++)
            {
              gint64 col = k % cols, row = (k / cols) % rows;

              causal = col <= row ? c->f[k] == 0 : c->f[k] < -1e4;
            }
          if (causal)
            return TRUE;
        }
      if (value->producer < 0)
        continue;
      const Node *node = &im->nodes[value->producer];

      for (guint k = 0; k < G_N_ELEMENTS (causal_ops); k++)
        if (g_str_equal (node->op, causal_ops[k]))
          return TRUE;
      for (guint i = 0; i < node->n_in && stack->len < 65536; i++)
        if (node->in[i] >= 0)
          g_array_append_val (stack, node->in[i]);
    }
  return FALSE;
}

/* torch's export of F.scaled_dot_product_attention scales q and k^T by sqrt(scale) each:
 * @v through a Mul by a constant scalar, the scalar folded into @scale. */
static int
scaled_operand (Importer *im, int v, double *scale, GArray *set)
{
  int m = producer_op (im, v, "Mul");
  double c;

  for (guint i = 0; m >= 0 && i < 2; i++)
    if (const_scalar (im, in_at (im, m, i), &c) && only_consumer (im, v, NULL) >= 0)
      {
        *scale *= c;
        SET_ADD (m);
        return in_at (im, m, 1 - i);
      }
  return v;
}

/* ... and guards the softmax of a row masked whole: Where(IsNaN(p), 0, p). */
static int
skip_nan_guard (Importer *im, int p, GArray *set)
{
  const Value *value = p >= 0 ? value_at (im, p) : NULL;
  int nan = -1, where = -1;

  if (value == NULL || value->consumers->len != 2 || value->is_output)
    return p;
  for (guint k = 0; k < 2; k++)
    {
      int c = g_array_index (value->consumers, int, k);

      if (g_str_equal (im->nodes[c].op, "IsNaN"))
        nan = c;
      else if (g_str_equal (im->nodes[c].op, "Where"))
        where = c;
    }
  if (nan < 0 || where < 0 || only_consumer (im, out0 (im, nan), "Where") != where
      || in_at (im, where, 0) != out0 (im, nan) || !is_const_scalar (im, in_at (im, where, 1), 0, 0)
      || in_at (im, where, 2) != p)
    return p;
  SET_ADD (nan);
  SET_ADD (where);
  return out0 (im, where);
}

/* softmax(q k^T * scale + mask) v, as HF's eager attention exports it: @sm is the Softmax. */
static void
match_attention (Importer *im, int sm)
{
  SET_NEW ();
  Fused f;
  int v = in_at (im, sm, 0), p, mask = -1, mm, kt, q, k, val, mm2;
  double scale = 1, c;

  fused_init (&f, FUSED_SDPA);
  SET_ADD (sm);
  if ((p = producer_op (im, v, "Add")) >= 0)
    {
      for (guint i = 0; i < 2 && mask < 0; i++)
        {
          int s = producer_of (im, in_at (im, p, i));

          if (s >= 0
              && (g_str_equal (im->nodes[s].op, "MatMul") || g_str_equal (im->nodes[s].op, "Mul")
                  || g_str_equal (im->nodes[s].op, "Div")))
            {
              mask = in_at (im, p, 1 - i);
              v = in_at (im, p, i);
            }
        }
      if (mask < 0)
        return;
      SET_ADD (p);
    }
  if ((p = producer_op (im, v, "Mul")) >= 0 || (p = producer_op (im, v, "Div")) >= 0)
    {
      gboolean div = g_str_equal (im->nodes[p].op, "Div");

      if (const_scalar (im, in_at (im, p, 1), &c) && c != 0)
        v = in_at (im, p, 0);
      else if (!div && const_scalar (im, in_at (im, p, 0), &c))
        v = in_at (im, p, 1);
      else
        return;
      scale = div ? 1 / c : c;
      SET_ADD (p);
    }
  if ((mm = producer_op (im, v, "MatMul")) < 0)
    return;
  SET_ADD (mm);
  q = scaled_operand (im, in_at (im, mm, 0), &scale, set);
  if ((kt = producer_op (im, scaled_operand (im, in_at (im, mm, 1), &scale, set), "Transpose")) < 0)
    return;
  {
    const Onnx__AttributeProto *perm = attr_find (&im->nodes[kt], "perm");

    if (perm == NULL || perm->n_ints != 4 || perm->ints[0] != 0 || perm->ints[1] != 1
        || perm->ints[2] != 3 || perm->ints[3] != 2)
      return;
  }
  SET_ADD (kt);
  f.check[0] = in_at (im, kt, 0);
  k = skip_repeat_kv (im, in_at (im, kt, 0), set);
  if (k == f.check[0])
    f.check[0] = -1;
  val = skip_casts_forward (im, skip_nan_guard (im, out0 (im, sm), set), set);
  if ((mm2 = only_consumer (im, val, "MatMul")) < 0 || in_at (im, mm2, 0) != val)
    return;
  SET_ADD (mm2);
  f.check[1] = in_at (im, mm2, 1);
  val = skip_repeat_kv (im, in_at (im, mm2, 1), set);
  if (val == f.check[1])
    f.check[1] = -1;
  f.scale = scale;
  f.causal = mask >= 0 && mask_is_causal (im, mask);
  fused_input (&f, q);
  fused_input (&f, k);
  fused_input (&f, val);
  claim (im, set, mm2, &f);
}

/* An exporter's name for a tensor it made (torch's constant folding writes the transposed
 * weight of an nn.Linear as "onnx::MatMul_123"). */
static gboolean
is_exporter_name (const char *name)
{
  return g_str_has_prefix (name, "onnx::");
}

/* x @ W^T (+ b): a MatMul whose B is a weight, through the Transpose exporters write for
 * nn.Linear, and the Add of its bias. @mm is the MatMul. */
static void
match_linear (Importer *im, int mm)
{
  SET_NEW ();
  Fused f;
  int b = in_at (im, mm, 1), t = producer_op (im, b, "Transpose"), w, add, bias, carrier = mm;

  fused_init (&f, FUSED_LINEAR);
  if (t >= 0)
    {
      const Onnx__AttributeProto *perm = attr_find (&im->nodes[t], "perm");

      w = in_at (im, t, 0);
      if (!is_parameter (im, w, 2) || (perm != NULL && (perm->n_ints != 2 || perm->ints[0] != 1)))
        return;
      SET_ADD (t);
      f.transpose_b = TRUE;
    }
  else if (is_parameter (im, b, 2))
    {
      w = b;
      /* Folded from Transpose(weight) by the exporter: the weight is nn.Linear's, [out, in],
       * named for its module when that name is free. */
      if (is_exporter_name (value_at (im, w)->name) && value_at (im, w)->consumers->len == 1)
        {
          Const *c = value_at (im, w)->constant;
          const char *last;
          g_autofree char *module = module_path (&im->nodes[mm], &last);
          g_autofree char *name = g_strconcat (module, ".weight", NULL);
          gint64 k = c->shape[0];

          c->shape[0] = c->shape[1];
          c->shape[1] = k;
          f.transpose_b = TRUE;
          if (module[0] != '\0' && value_find (im, name) < 0)
            {
              g_hash_table_remove (im->by_name, value_at (im, w)->name);
              g_free (value_at (im, w)->name);
              value_at (im, w)->name = g_steal_pointer (&name);
              g_hash_table_insert (im->by_name, value_at (im, w)->name, GINT_TO_POINTER (w + 1));
            }
        }
    }
  else
    return;
  SET_ADD (mm);
  fused_input (&f, in_at (im, mm, 0));
  fused_input (&f, w);
  if ((add = only_consumer (im, out0 (im, mm), "Add")) >= 0
      && is_parameter (im, (bias = other_operand (im, add, out0 (im, mm))), 1))
    {
      SET_ADD (add);
      fused_input (&f, bias);
      carrier = add;
    }
  claim (im, set, carrier, &f);
}

static gboolean try_fold (Importer *im, int n);

/* Constant expressions that need no shapes (the Sqrt of a constant an exporter writes for a
 * scale) are folded before matching, so the matchers see their values. A node that does not
 * fold here is looked at again when the graph is built. */
static void
prefold (Importer *im)
{
  for (guint k = 0; k < im->n_nodes; k++)
    if (!g_str_equal (im->nodes[k].op, "Shape") && !g_str_equal (im->nodes[k].op, "Size")
        && !g_str_equal (im->nodes[k].op, "Constant"))
      {
        try_fold (im, k);
        g_clear_error (&im->error);
      }
}

static const struct
{
  const char *op;
  void (*match) (Importer *im, int node);
} matchers[] = {
  /* Attention and rotary first: their Mul and MatMul nodes are not Linears or norms. */
  { "Softmax", match_attention }, { "Neg", match_rotary },     { "Pow", match_rms_norm },
  { "Erf", match_gelu_erf },      { "Tanh", match_gelu_tanh }, { "Sigmoid", match_silu },
  { "MatMul", match_linear },
};

static void
match_all (Importer *im)
{
  for (guint m = 0; m < G_N_ELEMENTS (matchers); m++)
    for (guint k = 0; k < im->n_nodes; k++)
      if (!im->nodes[k].claimed && g_str_equal (im->nodes[k].op, matchers[m].op)
          && (im->nodes[k].proto->domain == NULL || im->nodes[k].proto->domain[0] == '\0'))
        matchers[m].match (im, k);
}

/* ---- Pass 3: live nodes, folding, and the Shardscope ops. */

static void
mark_live (Importer *im)
{
  g_autoptr (GArray) stack = g_array_new (FALSE, FALSE, sizeof (int));

  for (guint v = 0; v < im->values->len; v++)
    if (value_at (im, v)->is_output && value_at (im, v)->producer >= 0)
      g_array_append_val (stack, value_at (im, v)->producer);
  while (stack->len > 0)
    {
      int n = g_array_index (stack, int, stack->len - 1);
      Node *node = &im->nodes[n];
      const int *deps = node->in;
      guint n_deps = node->n_in;

      g_array_set_size (stack, stack->len - 1);
      if (node->live)
        continue;
      node->live = TRUE;
      if (node->fused >= 0)
        {
          const Fused *f = &g_array_index (im->fused, Fused, node->fused);

          deps = f->inputs;
          n_deps = f->n_inputs;
          /* The checks read constants: the slices' starts and ends. */
          for (guint c = 0; c < 2; c++)
            if (f->kind == FUSED_ROTARY)
              for (guint i = 1; i < im->nodes[f->check[c]].n_in; i++)
                {
                  int p = in_at (im, f->check[c], i) >= 0
                              ? producer_of (im, in_at (im, f->check[c], i))
                              : -1;

                  if (p >= 0)
                    g_array_append_val (stack, p);
                }
          if (f->kind == FUSED_RMS_NORM && im->nodes[f->check[0]].n_in > 1)
            {
              int p = producer_of (im, in_at (im, f->check[0], 1));

              if (p >= 0)
                g_array_append_val (stack, p);
            }
        }
      for (guint i = 0; i < n_deps; i++)
        if (deps[i] >= 0 && value_at (im, deps[i])->producer >= 0)
          g_array_append_val (stack, value_at (im, deps[i])->producer);
    }
}

static Value *
resolved (Importer *im, int v)
{
  while (value_at (im, v)->alias >= 0)
    v = value_at (im, v)->alias;
  return value_at (im, v);
}

static int
resolved_index (Importer *im, int v)
{
  while (value_at (im, v)->alias >= 0)
    v = value_at (im, v)->alias;
  return v;
}

/* Whether the shape (and type) of @v is known, filling them in from its constant. */
static gboolean
value_known (Importer *im, int v)
{
  Value *value = resolved (im, v);

  if (!value->known && value->constant != NULL)
    {
      value->known = TRUE;
      value->dtype = value->constant->dtype;
      value->rank = value->constant->rank;
      memcpy (value->shape, value->constant->shape, sizeof value->shape);
    }
  return value->known;
}

static const Const *
const_data (Importer *im, int v)
{
  const Value *value = v >= 0 ? resolved (im, v) : NULL;

  return value != NULL && value->constant != NULL && value->constant->i != NULL ? value->constant
                                                                                : NULL;
}

static int
opset_of (Importer *im)
{
  return (int)MIN (im->opset, G_MAXINT);
}

static char *
module_path (const Node *node, const char **last)
{
  const char *name = node->proto->name != NULL ? node->proto->name : "";
  const char *slash = strrchr (name, '/');
  g_autofree char *module = NULL;

  if (slash == NULL)
    {
      *last = name[0] != '\0' ? name : node_label (node);
      return g_strdup ("");
    }
  *last = slash[1] != '\0' ? slash + 1 : node_label (node);
  while (*name == '/')
    name++;
  module = g_strndup (name, MAX (slash - name, 0));
  g_strdelimit (module, "/", '.');
  return g_steal_pointer (&module);
}

static gboolean
name_taken (Importer *im, const char *name)
{
  return g_hash_table_contains (im->names, name)
         || planner_graph_find_tensor (im->planner, name) >= 0;
}

/* @base, else @base_1, @base_2, ...: the next suffix of each base is kept, so a file whose
 * nodes share one name (ONNX does not forbid it) costs no quadratic search. */
static char *
unique_name (Importer *im, const char *base)
{
  guint k = GPOINTER_TO_UINT (g_hash_table_lookup (im->suffixes, base));
  char *name = k == 0 ? g_strdup (base) : g_strdup_printf ("%s_%u", base, k);

  while (name_taken (im, name))
    {
      g_free (name);
      name = g_strdup_printf ("%s_%u", base, ++k);
    }
  g_hash_table_insert (im->suffixes, g_strdup (base), GUINT_TO_POINTER (k + 1));
  g_hash_table_add (im->names, g_strdup (name));
  return name;
}

/* Op names: a module's principal op (its Linear, norm, activation, embedding) takes the module
 * path of torch's node names ("/model/layers.0/self_attn/q_proj/MatMul" ->
 * "model.layers.0.self_attn.q_proj"), so policies written for the Hugging Face config apply;
 * a claimed subgraph is "<module>.<role>", any other op "<module>.<node>". */
static char *
op_name (Importer *im, int n, const char *role, gboolean principal)
{
  const char *last;
  g_autofree char *module = module_path (&im->nodes[n], &last);
  g_autofree char *base = NULL;

  if (principal && module[0] != '\0' && !name_taken (im, module))
    return unique_name (im, module);
  if (role == NULL)
    role = last;
  base = module[0] != '\0' ? g_strconcat (module, ".", role, NULL) : g_strdup (role);
  return unique_name (im, base);
}

static gboolean
classify_symbol (const char *param, gboolean *batch)
{
  g_autofree char *lower = g_ascii_strdown (param, -1);

  if (strstr (lower, "batch") != NULL)
    return *batch = TRUE, TRUE;
  if (strstr (lower, "seq") != NULL || strstr (lower, "length") != NULL
      || strstr (lower, "token") != NULL)
    return *batch = FALSE, TRUE;
  return FALSE;
}

static gboolean
resolve_input (Importer *im, int v)
{
  Value *value = value_at (im, v);
  const Onnx__TypeProto *type = value->input->type;
  const Onnx__TensorShapeProto *shape;

  if (type == NULL || type->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE
      || type->tensor_type == NULL || !type->tensor_type->has_elem_type)
    return fail (im, PLANNER_ERROR_MALFORMED_FILE, "graph input %s is not a tensor with a type",
                 value->name);
  shape = type->tensor_type->shape;
  if (shape == NULL)
    return fail (im, PLANNER_ERROR_SHAPE_MISMATCH, "graph input %s has no shape", value->name);
  if (shape->n_dim > PLANNER_MAX_RANK)
    return fail (im, PLANNER_ERROR_SHAPE_MISMATCH, "graph input %s has %zu dims; at most %d",
                 value->name, shape->n_dim, PLANNER_MAX_RANK);
  value->dtype = type->tensor_type->elem_type;
  value->rank = shape->n_dim;
  for (guint d = 0; d < shape->n_dim; d++)
    {
      const Onnx__TensorShapeProto__Dimension *dim = shape->dim[d];
      gboolean batch;

      if (dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE
          && dim->dim_value >= 1 && dim->dim_value <= MAX_DIM)
        value->shape[d] = dim->dim_value;
      else if (dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM
               && dim->dim_param != NULL && classify_symbol (dim->dim_param, &batch))
        {
          value->shape[d] = batch ? im->batch : im->seq;
          *(batch ? &im->used_batch : &im->used_seq) = TRUE;
        }
      else if (dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM
               && dim->dim_param != NULL)
        return fail (
            im, PLANNER_ERROR_SHAPE_MISMATCH,
            "dim %u of graph input %s is the symbol \"%s\", which neither --batch nor --seq "
            "sets; name the batch dim \"batch\" and the sequence dim \"sequence\" when "
            "exporting (torch.onnx.export's dynamic_axes), or export fixed sizes",
            d, value->name, dim->dim_param);
      else
        return fail (im, PLANNER_ERROR_SHAPE_MISMATCH,
                     "dim %u of graph input %s has no size%s; export it with a size or a symbol "
                     "named batch or sequence",
                     d, value->name,
                     dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE
                         ? " above 0"
                         : "");
    }
  value->known = TRUE;
  return TRUE;
}

/* The planner tensor of @v: graph inputs and constants are added at their first use. */
static int
tensor_of (Importer *im, int v, const Node *user)
{
  Value *value = resolved (im, v);
  PlannerDType dtype;
  g_autoptr (GError) local = NULL;

  if (value->tensor >= 0)
    return value->tensor;
  if (!value_known (im, v) || (value->producer >= 0 && value->constant == NULL))
    return fail (im, PLANNER_ERROR_INVALID_GRAPH, "node %s (%s): input %s has no tensor",
                 node_label (user), user->op, value->name),
           -1;
  if (!planner_dtype_of (value->dtype, &dtype))
    return fail (im, PLANNER_ERROR_UNKNOWN_OP_TYPE,
                 "node %s (%s): input %s is %s; tensors must be float, float16, bfloat16, int64 "
                 "or int32",
                 node_label (user), user->op, value->name, dtype_name (value->dtype)),
           -1;
  for (guint d = 0; d < value->rank; d++)
    if (value->shape[d] < 1)
      return fail (im, PLANNER_ERROR_SHAPE_MISMATCH, "node %s (%s): input %s has an empty dim %u",
                   node_label (user), user->op, value->name, d),
             -1;
  if (value->input != NULL)
    value->tensor = planner_graph_add_input (im->planner, value->name, dtype, value->rank,
                                             value->shape, &local);
  else
    value->tensor = planner_graph_add_parameter (im->planner, value->name, dtype, value->rank,
                                                 value->shape, &local);
  if (value->tensor < 0)
    fail (im, PLANNER_ERROR_INVALID_GRAPH, "%s", local->message);
  return value->tensor;
}

/* Adds one Shardscope op for node @n with @inputs (values) and sets @n's outputs. */
static gboolean
emit (Importer *im, int n, PlannerOpType type, const PlannerOpAttrs *attrs, const int *inputs,
      guint n_inputs, const int *outputs, guint n_outputs, const char *role, gboolean principal)
{
  const Node *node = &im->nodes[n];
  guint ids[PLANNER_MAX_OPERANDS];
  g_autofree char *name = NULL;
  g_autoptr (GPtrArray) out_names = g_ptr_array_new_with_free_func (g_free);
  g_autoptr (GError) local = NULL;
  int op;

  if (n_inputs > PLANNER_MAX_OPERANDS || n_outputs > PLANNER_MAX_OPERANDS)
    return fail (im, PLANNER_ERROR_SHAPE_MISMATCH,
                 "node %s (%s) has more than %d inputs or outputs", node_label (node), node->op,
                 PLANNER_MAX_OPERANDS);
  for (guint i = 0; i < n_inputs; i++)
    {
      int t = inputs[i] >= 0 ? tensor_of (im, inputs[i], node)
                             : (fail (im, PLANNER_ERROR_INVALID_GRAPH,
                                      "node %s (%s): input %u is omitted, and the op needs it",
                                      node_label (node), node->op, i),
                                -1);

      if (t < 0)
        return FALSE;
      ids[i] = t;
    }
  name = op_name (im, n, role, principal);
  for (guint o = 0; o < n_outputs; o++)
    {
      const Value *out = outputs[o] >= 0 ? value_at (im, outputs[o]) : NULL;

      g_ptr_array_add (out_names, out != NULL && out->is_output ? g_strdup (out->name)
                                  : n_outputs == 1              ? g_strdup (name)
                                                   : g_strdup_printf ("%s:%u", name, o));
      if (name_taken (im, g_ptr_array_index (out_names, o))
          && !g_str_equal (g_ptr_array_index (out_names, o), name))
        {
          g_autofree char *base = g_ptr_array_steal_index (out_names, o);

          g_ptr_array_insert (out_names, o, unique_name (im, base));
        }
    }
  g_ptr_array_add (out_names, NULL);
  op = planner_graph_add_op (im->planner, name, type, attrs, ids, n_inputs, n_outputs,
                             (const char *const *)out_names->pdata, &local);
  if (op < 0)
    return fail (im, local->code, "node %s (%s): %s", node_label (node), node->op, local->message);
  for (guint o = 0; o < n_outputs; o++)
    if (outputs[o] >= 0)
      {
        Value *out = value_at (im, outputs[o]);
        guint id = planner_graph_op_output (im->planner, op, o);
        const PlannerTensor *t = planner_graph_get_tensor (im->planner, id);

        out->tensor = id;
        out->known = TRUE;
        out->dtype = onnx_dtype_of (t->dtype);
        out->rank = t->rank;
        memcpy (out->shape, t->shape, sizeof out->shape);
      }
  return TRUE;
}

/* ---- Folding: shape arithmetic on constants of at most MAX_FOLD elements. */

static gint64
numel_of (const gint64 *shape, guint rank)
{
  gint64 n = 1;

  for (guint d = 0; d < rank; d++)
    n = shape[d] != 0 && n > MAX_NUMEL / shape[d] ? MAX_NUMEL : n * shape[d];
  return n;
}

/* A folded result: NULL (with the error set) when it would exceed MAX_FOLD. */
static Const *
fold_new (Importer *im, const Node *node, int dtype, guint rank, const gint64 *shape)
{
  gint64 n = numel_of (shape, rank);

  if (n > MAX_FOLD)
    return fail (im, PLANNER_ERROR_SHAPE_MISMATCH,
                 "node %s (%s): folding its constant inputs gives %" G_GINT64_FORMAT
                 " elements; at most %d are folded",
                 node_label (node), node->op, n, MAX_FOLD),
           NULL;
  im->folded += n;
  if (im->folded > MAX_FOLD_TOTAL)
    return fail (im, PLANNER_ERROR_SHAPE_MISMATCH,
                 "node %s (%s): the file's constant folding exceeds %" G_GUINT64_FORMAT
                 " elements in all",
                 node_label (node), node->op, MAX_FOLD_TOTAL),
           NULL;
  return const_new (dtype, rank, shape, n);
}

static void
const_put (Const *c, gint64 k, gint64 i, double f)
{
  if (dtype_is_float (c->dtype))
    {
      c->f[k] = f;
      c->i[k] = double_to_int (f);
    }
  else
    {
      c->i[k] = c->dtype == ONNX__TENSOR_PROTO__DATA_TYPE__BOOL ? i != 0 : i;
      c->f[k] = (double)c->i[k];
    }
}

/* Offset into @c of the element at output index @k of a broadcast to @shape/@rank. */
static gint64
broadcast_offset (const Const *c, const gint64 *shape, guint rank, gint64 k)
{
  gint64 offset = 0, stride = 1;

  for (int d = (int)rank - 1; d >= 0; d--)
    {
      gint64 index = k % shape[d];
      int cd = d - (int)(rank - c->rank);

      k /= shape[d];
      if (cd >= 0)
        {
          if (c->shape[cd] != 1)
            offset += index * stride;
          stride *= c->shape[cd];
        }
    }
  return offset;
}

static gboolean
broadcast_shapes (Importer *im, const Node *node, const Const *const *in, guint n, guint *rank,
                  gint64 *shape)
{
  *rank = 0;
  for (guint i = 0; i < n; i++)
    *rank = MAX (*rank, in[i]->rank);
  for (guint d = 0; d < *rank; d++)
    {
      shape[d] = 1;
      for (guint i = 0; i < n; i++)
        {
          int cd = (int)d - (int)(*rank - in[i]->rank);
          gint64 s = cd >= 0 ? in[i]->shape[cd] : 1;

          if (s != 1 && shape[d] != 1 && s != shape[d])
            return fail (im, PLANNER_ERROR_SHAPE_MISMATCH,
                         "node %s (%s): constant inputs of shapes that do not broadcast",
                         node_label (node), node->op);
          if (s != 1)
            shape[d] = s;
        }
    }
  return TRUE;
}

typedef enum
{
  EW_ADD,
  EW_SUB,
  EW_MUL,
  EW_DIV,
  EW_POW,
  EW_MAX,
  EW_MIN,
  EW_MOD,
  EW_EQUAL,
  EW_LESS,
  EW_LESS_EQUAL,
  EW_GREATER,
  EW_GREATER_EQUAL,
  EW_AND,
  EW_OR,
  EW_NEG,
  EW_SQRT,
  EW_RECIPROCAL,
  EW_ABS,
  EW_NOT,
  EW_FLOOR,
  EW_CEIL,
  EW_WHERE,
} Elementwise;

static const struct
{
  const char *op;
  Elementwise kind;
  guint arity;
  gboolean to_bool;
} elementwise_ops[] = {
  { "Add", EW_ADD, 2 },
  { "Sub", EW_SUB, 2 },
  { "Mul", EW_MUL, 2 },
  { "Div", EW_DIV, 2 },
  { "Pow", EW_POW, 2 },
  { "Max", EW_MAX, 2 },
  { "Min", EW_MIN, 2 },
  { "Mod", EW_MOD, 2 },
  { "Equal", EW_EQUAL, 2, TRUE },
  { "Less", EW_LESS, 2, TRUE },
  { "LessOrEqual", EW_LESS_EQUAL, 2, TRUE },
  { "Greater", EW_GREATER, 2, TRUE },
  { "GreaterOrEqual", EW_GREATER_EQUAL, 2, TRUE },
  { "And", EW_AND, 2, TRUE },
  { "Or", EW_OR, 2, TRUE },
  { "Neg", EW_NEG, 1 },
  { "Sqrt", EW_SQRT, 1 },
  { "Reciprocal", EW_RECIPROCAL, 1 },
  { "Abs", EW_ABS, 1 },
  { "Not", EW_NOT, 1, TRUE },
  { "Floor", EW_FLOOR, 1 },
  { "Ceil", EW_CEIL, 1 },
  { "Where", EW_WHERE, 3 },
};

static gboolean
elementwise_value (Elementwise kind, gboolean is_float, const gint64 *a, const double *x, gint64 *i,
                   double *f)
{
  gint64 p = a[0], q = a[1];
  double u = x[0], v = x[1];

  *f = 0;
  *i = 0;
  switch (kind)
    {
    case EW_ADD:
      *f = u + v;
      *i = (gint64)((guint64)p + (guint64)q);
      break;
    case EW_SUB:
      *f = u - v;
      *i = (gint64)((guint64)p - (guint64)q);
      break;
    case EW_MUL:
      *f = u * v;
      *i = (gint64)((guint64)p * (guint64)q);
      break;
    case EW_DIV:
      if (!is_float && (q == 0 || (p == G_MININT64 && q == -1)))
        return FALSE;
      *f = u / v;
      *i = is_float ? 0 : p / q;
      break;
    case EW_MOD:
      if (!is_float && (q == 0 || (p == G_MININT64 && q == -1)))
        return FALSE;
      *f = fmod (u, v);
      *i = is_float ? 0 : p % q;
      break;
    case EW_POW:
      *f = pow (u, v);
      *i = double_to_int (*f);
      break;
    case EW_MAX:
      *f = MAX (u, v);
      *i = MAX (p, q);
      break;
    case EW_MIN:
      *f = MIN (u, v);
      *i = MIN (p, q);
      break;
    case EW_EQUAL:
      *i = is_float ? u == v : p == q;
      break;
    case EW_LESS:
      *i = is_float ? u < v : p < q;
      break;
    case EW_LESS_EQUAL:
      *i = is_float ? u <= v : p <= q;
      break;
    case EW_GREATER:
      *i = is_float ? u > v : p > q;
      break;
    case EW_GREATER_EQUAL:
      *i = is_float ? u >= v : p >= q;
      break;
    case EW_AND:
      *i = p && q;
      break;
    case EW_OR:
      *i = p || q;
      break;
    case EW_NEG:
      *f = -u;
      *i = (gint64)(0 - (guint64)p);
      break;
    case EW_SQRT:
      *f = sqrt (u);
      *i = double_to_int (*f);
      break;
    case EW_RECIPROCAL:
      *f = 1 / u;
      *i = double_to_int (*f);
      break;
    case EW_ABS:
      *f = fabs (u);
      *i = p < 0 ? (gint64)(0 - (guint64)p) : p;
      break;
    case EW_NOT:
      *i = !p;
      break;
    case EW_FLOOR:
      *f = floor (u);
      *i = p;
      break;
    case EW_CEIL:
      *f = ceil (u);
      *i = p;
      break;
    case EW_WHERE:
      *i = a[0] ? a[1] : a[2];
      *f = a[0] ? x[1] : x[2];
      break;
    }
  if (is_float && kind != EW_WHERE)
    *i = double_to_int (*f);
  return TRUE;
}

static Const *
fold_elementwise (Importer *im, const Node *node, guint e, const Const *const *in)
{
  guint rank;
  gint64 shape[PLANNER_MAX_RANK];
  const Const *value = in[elementwise_ops[e].kind == EW_WHERE ? 1 : 0];
  gboolean is_float = dtype_is_float (value->dtype);
  Const *c;

  if (!broadcast_shapes (im, node, in, elementwise_ops[e].arity, &rank, shape)
      || (c = fold_new (im, node,
                        elementwise_ops[e].to_bool ? ONNX__TENSOR_PROTO__DATA_TYPE__BOOL
                                                   : value->dtype,
                        rank, shape))
             == NULL)
    return NULL;
  for (gint64 k = 0; k < c->n; k++)
    {
      gint64 a[3] = { 0 }, i;
      double x[3] = { 0 }, f;

      for (guint j = 0; j < elementwise_ops[e].arity; j++)
        {
          gint64 offset = broadcast_offset (in[j], shape, rank, k);

          a[j] = in[j]->i[offset];
          x[j] = in[j]->f[offset];
        }
      if (!elementwise_value (elementwise_ops[e].kind, is_float, a, x, &i, &f))
        return fail (im, PLANNER_ERROR_SHAPE_MISMATCH, "node %s (%s): integer division by zero",
                     node_label (node), node->op),
               const_free (c), NULL;
      const_put (c, k, i, f);
    }
  return c;
}

/* Axis @axis of a rank-@rank tensor, negative counting from the end. */
static gboolean
norm_axis (Importer *im, const Node *node, gint64 axis, guint rank, guint *out)
{
  if (axis < -(gint64)rank || axis >= (gint64)MAX (rank, 1))
    return fail (im, PLANNER_ERROR_SHAPE_MISMATCH,
                 "node %s (%s): axis %" G_GINT64_FORMAT " is outside a tensor of rank %u",
                 node_label (node), node->op, axis, rank);
  *out = axis < 0 ? axis + rank : axis;
  return TRUE;
}

/* The integers of an attribute or, from opset @since_input_opset on, of input @input. */
static gboolean
int_list (Importer *im, int n, const char *attr, guint input, gint64 *values, guint *count,
          gboolean *present)
{
  const Node *node = &im->nodes[n];
  const Onnx__AttributeProto *a = attr_find (node, attr);
  const Const *c;

  *present = FALSE;
  *count = 0;
  if (a != NULL)
    {
      if (a->n_ints > PLANNER_MAX_OPERANDS)
        return fail (im, PLANNER_ERROR_SHAPE_MISMATCH,
                     "node %s (%s): %s has %zu values; at most %d", node_label (node), node->op,
                     attr, a->n_ints, PLANNER_MAX_OPERANDS);
      *present = TRUE;
      *count = a->n_ints;
      if (a->n_ints > 0)
        memcpy (values, a->ints, a->n_ints * sizeof *values);
      return TRUE;
    }
  if (input >= node->n_in || node->in[input] < 0)
    return TRUE;
  if ((c = const_data (im, node->in[input])) == NULL)
    return fail (im, PLANNER_ERROR_SHAPE_MISMATCH,
                 "node %s (%s): input %u (%s) must be a constant, but it is computed at run time",
                 node_label (node), node->op, input, value_at (im, node->in[input])->name);
  if (c->n > PLANNER_MAX_OPERANDS)
    return fail (im, PLANNER_ERROR_SHAPE_MISMATCH,
                 "node %s (%s): input %u has %" G_GINT64_FORMAT " values; at most %d",
                 node_label (node), node->op, input, c->n, PLANNER_MAX_OPERANDS);
  *present = TRUE;
  *count = c->n;
  memcpy (values, c->i, c->n * sizeof *values);
  return TRUE;
}

/* Output shapes of the view ops (Reshape, Unsqueeze, Squeeze, Flatten) from the input's. */
static gboolean
view_shape (Importer *im, int n, guint in_rank, const gint64 *in_shape, guint *rank, gint64 *shape)
{
  const Node *node = &im->nodes[n];
  gint64 ints[PLANNER_MAX_OPERANDS];
  guint count;
  gboolean present;
  gint64 total = numel_of (in_shape, in_rank);

  if (g_str_equal (node->op, "Flatten"))
    {
      guint axis;

      if (!norm_axis (im, node, attr_int (node, "axis", 1), in_rank + 1, &axis))
        return FALSE;
      *rank = 2;
      shape[0] = numel_of (in_shape, axis);
      shape[1] = numel_of (in_shape + axis, in_rank - axis);
      return TRUE;
    }
  if (g_str_equal (node->op, "Reshape"))
    {
      int infer = -1;
      gint64 known = 1;

      if (!int_list (im, n, NULL, 1, ints, &count, &present))
        return FALSE;
      if (!present || count > PLANNER_MAX_RANK)
        return fail (im, PLANNER_ERROR_SHAPE_MISMATCH,
                     "node %s (Reshape): a target shape of %u dims", node_label (node), count);
      *rank = count;
      for (guint d = 0; d < count; d++)
        {
          shape[d] = ints[d];
          if (ints[d] == 0 && !attr_int (node, "allowzero", 0))
            {
              if (d >= in_rank)
                return fail (im, PLANNER_ERROR_SHAPE_MISMATCH,
                             "node %s (Reshape): 0 copies dim %u, which the input lacks",
                             node_label (node), d);
              shape[d] = in_shape[d];
            }
          if (shape[d] == -1 && infer < 0)
            infer = d;
          else if (shape[d] < 1 || shape[d] > MAX_DIM)
            return fail (im, PLANNER_ERROR_SHAPE_MISMATCH,
                         "node %s (Reshape): target dim %u is %" G_GINT64_FORMAT, node_label (node),
                         d, shape[d]);
          else
            known *= shape[d];
          if (known > MAX_NUMEL)
            return fail (im, PLANNER_ERROR_SHAPE_MISMATCH, "node %s (Reshape): too many elements",
                         node_label (node));
        }
      if (infer >= 0)
        shape[infer] = known > 0 && total % known == 0 ? total / known : -1;
      if ((infer >= 0 && shape[infer] < 1) || numel_of (shape, *rank) != total)
        return fail (im, PLANNER_ERROR_SHAPE_MISMATCH,
                     "node %s (Reshape): the target shape does not hold the %" G_GINT64_FORMAT
                     " elements of the input",
                     node_label (node), total);
      return TRUE;
    }
  if (!int_list (im, n, "axes", 1, ints, &count, &present))
    return FALSE;
  if (g_str_equal (node->op, "Unsqueeze"))
    {
      guint32 inserted = 0;
      guint from = 0;

      *rank = in_rank + count;
      if (*rank > PLANNER_MAX_RANK)
        return fail (im, PLANNER_ERROR_SHAPE_MISMATCH, "node %s (Unsqueeze): more than %d dims",
                     node_label (node), PLANNER_MAX_RANK);
      for (guint k = 0; k < count; k++)
        {
          guint axis;

          if (!norm_axis (im, node, ints[k], *rank, &axis))
            return FALSE;
          inserted |= 1u << axis;
        }
      for (guint d = 0; d < *rank; d++)
        shape[d] = (inserted & (1u << d)) ? 1 : (from < in_rank ? in_shape[from++] : 1);
      return TRUE;
    }
  /* Squeeze: the listed dims, or every dim of size 1. */
  {
    guint32 removed = 0;

    for (guint k = 0; k < count; k++)
      {
        guint axis;

        if (!norm_axis (im, node, ints[k], in_rank, &axis))
          return FALSE;
        if (in_shape[axis] != 1)
          return fail (im, PLANNER_ERROR_SHAPE_MISMATCH,
                       "node %s (Squeeze): dim %u has size %" G_GINT64_FORMAT ", not 1",
                       node_label (node), axis, in_shape[axis]);
        removed |= 1u << axis;
      }
    *rank = 0;
    for (guint d = 0; d < in_rank; d++)
      if (!(present ? (removed & (1u << d)) : in_shape[d] == 1))
        shape[(*rank)++] = in_shape[d];
    return TRUE;
  }
}

/* Slice parameters per axis: start, step and count (ONNX's clamping). */
typedef struct
{
  gint64 start[PLANNER_MAX_RANK], step[PLANNER_MAX_RANK], count[PLANNER_MAX_RANK];
} SliceSpec;

static gboolean
slice_spec (Importer *im, int n, guint rank, const gint64 *shape, SliceSpec *spec)
{
  const Node *node = &im->nodes[n];
  gint64 starts[PLANNER_MAX_OPERANDS], ends[PLANNER_MAX_OPERANDS], axes[PLANNER_MAX_OPERANDS],
      steps[PLANNER_MAX_OPERANDS];
  guint n_starts, n_ends, n_axes, n_steps;
  gboolean present;

  if (!int_list (im, n, "starts", 1, starts, &n_starts, &present)
      || !int_list (im, n, "ends", 2, ends, &n_ends, &present)
      || !int_list (im, n, "axes", 3, axes, &n_axes, &present)
      || !int_list (im, n, "steps", 4, steps, &n_steps, &present))
    return FALSE;
  if (n_ends != n_starts || (n_axes != 0 && n_axes != n_starts)
      || (n_steps != 0 && n_steps != n_starts))
    return fail (im, PLANNER_ERROR_SHAPE_MISMATCH,
                 "node %s (Slice): starts, ends, axes and steps differ in length",
                 node_label (node));
  for (guint d = 0; d < rank; d++)
    {
      spec->start[d] = 0;
      spec->step[d] = 1;
      spec->count[d] = shape[d];
    }
  for (guint k = 0; k < n_starts; k++)
    {
      guint axis;
      gint64 step = n_steps ? steps[k] : 1, dim, start, end;

      if (!norm_axis (im, node, n_axes ? axes[k] : (gint64)k, rank, &axis))
        return FALSE;
      if (step == 0)
        return fail (im, PLANNER_ERROR_SHAPE_MISMATCH, "node %s (Slice): a step of 0",
                     node_label (node));
      dim = shape[axis];
      start = starts[k] < 0 ? MAX (starts[k], -dim) + dim : starts[k];
      end = ends[k] < 0 ? MAX (ends[k], -dim - 1) + dim : ends[k];
      start = step > 0 ? CLAMP (start, 0, dim) : CLAMP (start, 0, dim - 1);
      end = step > 0 ? CLAMP (end, 0, dim) : CLAMP (end, -1, dim - 1);
      spec->start[axis] = start;
      spec->step[axis] = step;
      spec->count[axis] = step > 0 ? MAX ((end - start + step - 1) / step, 0)
                                   : MAX ((start - end + (-step) - 1) / (-step), 0);
    }
  return TRUE;
}

/* Gather, Concat, Slice, Range, ConstantOfShape, Expand, Cast and the views on constants. */
static Const *
fold_structural (Importer *im, int n, const Const *const *in, gboolean *handled)
{
  const Node *node = &im->nodes[n];
  const char *op = node->op;
  Const *c = NULL;
  guint rank;
  gint64 shape[PLANNER_MAX_RANK];

  *handled = TRUE;
  if (g_str_equal (op, "Identity") || g_str_equal (op, "Reshape") || g_str_equal (op, "Unsqueeze")
      || g_str_equal (op, "Squeeze") || g_str_equal (op, "Flatten"))
    {
      if (g_str_equal (op, "Identity"))
        rank = in[0]->rank, memcpy (shape, in[0]->shape, sizeof shape);
      else if (!view_shape (im, n, in[0]->rank, in[0]->shape, &rank, shape))
        return NULL;
      if ((c = fold_new (im, node, in[0]->dtype, rank, shape)) == NULL)
        return NULL;
      memcpy (c->i, in[0]->i, c->n * sizeof *c->i);
      memcpy (c->f, in[0]->f, c->n * sizeof *c->f);
      return c;
    }
  if (g_str_equal (op, "Cast"))
    {
      int to = attr_int (node, "to", 0);

      if ((c = fold_new (im, node, to, in[0]->rank, in[0]->shape)) == NULL)
        return NULL;
      for (gint64 k = 0; k < c->n; k++)
        const_put (c, k, dtype_is_float (in[0]->dtype) ? double_to_int (in[0]->f[k]) : in[0]->i[k],
                   in[0]->f[k]);
      return c;
    }
  if (g_str_equal (op, "Gather"))
    {
      guint axis;
      gint64 outer, inner, dim;

      if (!norm_axis (im, node, attr_int (node, "axis", 0), in[0]->rank, &axis))
        return NULL;
      if (in[0]->rank + in[1]->rank - 1 > PLANNER_MAX_RANK || in[0]->rank == 0)
        return fail (im, PLANNER_ERROR_SHAPE_MISMATCH, "node %s (Gather): too many dims",
                     node_label (node)),
               NULL;
      rank = 0;
      for (guint d = 0; d < axis; d++)
        shape[rank++] = in[0]->shape[d];
      for (guint d = 0; d < in[1]->rank; d++)
        shape[rank++] = in[1]->shape[d];
      for (guint d = axis + 1; d < in[0]->rank; d++)
        shape[rank++] = in[0]->shape[d];
      if ((c = fold_new (im, node, in[0]->dtype, rank, shape)) == NULL)
        return NULL;
      outer = numel_of (in[0]->shape, axis);
      dim = in[0]->shape[axis];
      inner = numel_of (in[0]->shape + axis + 1, in[0]->rank - axis - 1);
      for (gint64 k = 0; k < c->n; k++)
        {
          gint64 o = k / (in[1]->n * inner), j = (k / inner) % in[1]->n, r = k % inner;
          gint64 index = in[1]->i[j] < 0 ? in[1]->i[j] + dim : in[1]->i[j];

          if (index < 0 || index >= dim)
            return fail (im, PLANNER_ERROR_SHAPE_MISMATCH,
                         "node %s (Gather): index %" G_GINT64_FORMAT
                         " is outside %" G_GINT64_FORMAT,
                         node_label (node), in[1]->i[j], dim),
                   const_free (c), NULL;
          gint64 from = (o * dim + index) * inner + r;

          c->i[k] = in[0]->i[from];
          c->f[k] = in[0]->f[from];
        }
      (void)outer;
      return c;
    }
  if (g_str_equal (op, "Concat"))
    {
      guint axis;
      gint64 offset = 0, inner;

      if (!norm_axis (im, node, attr_int (node, "axis", 0), in[0]->rank, &axis))
        return NULL;
      rank = in[0]->rank;
      memcpy (shape, in[0]->shape, sizeof shape);
      shape[axis] = 0;
      for (guint i = 0; i < node->n_in; i++)
        {
          if (in[i]->rank != rank)
            return fail (im, PLANNER_ERROR_SHAPE_MISMATCH,
                         "node %s (Concat): inputs of different ranks", node_label (node)),
                   NULL;
          for (guint d = 0; d < rank; d++)
            if (d != axis && in[i]->shape[d] != in[0]->shape[d])
              return fail (im, PLANNER_ERROR_SHAPE_MISMATCH,
                           "node %s (Concat): inputs differ in dim %u", node_label (node), d),
                     NULL;
          shape[axis] += in[i]->shape[axis];
          if (shape[axis] > MAX_FOLD)
            return fold_new (im, node, in[0]->dtype, rank, shape);
        }
      if ((c = fold_new (im, node, in[0]->dtype, rank, shape)) == NULL)
        return NULL;
      inner = numel_of (shape + axis + 1, rank - axis - 1);
      for (guint i = 0; i < node->n_in; i++)
        {
          gint64 chunk = in[i]->shape[axis] * inner, outer = numel_of (shape, axis);

          for (gint64 o = 0; o < outer; o++)
            for (gint64 r = 0; r < chunk; r++)
              {
                gint64 to = o * shape[axis] * inner + offset + r, from = o * chunk + r;

                c->i[to] = in[i]->i[from];
                c->f[to] = in[i]->f[from];
              }
          offset += chunk;
        }
      return c;
    }
  if (g_str_equal (op, "Slice"))
    {
      SliceSpec spec;

      if (!slice_spec (im, n, in[0]->rank, in[0]->shape, &spec)
          || (c = fold_new (im, node, in[0]->dtype, in[0]->rank, spec.count)) == NULL)
        return NULL;
      for (gint64 k = 0; k < c->n; k++)
        {
          gint64 rest = k, from = 0, stride = 1;

          for (int d = (int)in[0]->rank - 1; d >= 0; d--)
            {
              gint64 index = rest % spec.count[d];

              rest /= spec.count[d];
              from += (spec.start[d] + index * spec.step[d]) * stride;
              stride *= in[0]->shape[d];
            }
          c->i[k] = in[0]->i[from];
          c->f[k] = in[0]->f[from];
        }
      return c;
    }
  if (g_str_equal (op, "Range"))
    {
      gboolean is_float = dtype_is_float (in[0]->dtype);
      double start = in[0]->f[0], delta = in[2]->f[0];
      double count = delta != 0 ? ceil ((in[1]->f[0] - start) / delta) : -1;

      if (in[0]->n != 1 || in[1]->n != 1 || in[2]->n != 1 || !(count >= 0) || count > MAX_FOLD)
        return fail (im, PLANNER_ERROR_SHAPE_MISMATCH,
                     "node %s (Range): not a range of at most %d elements", node_label (node),
                     MAX_FOLD),
               NULL;
      shape[0] = (gint64)count;
      if ((c = fold_new (im, node, in[0]->dtype, 1, shape)) == NULL)
        return NULL;
      for (gint64 k = 0; k < c->n; k++)
        const_put (c, k, is_float ? 0 : in[0]->i[0] + k * in[2]->i[0], start + k * delta);
      return c;
    }
  if (g_str_equal (op, "ConstantOfShape") || g_str_equal (op, "Expand"))
    {
      gboolean expand = g_str_equal (op, "Expand");
      const Const *dims = in[expand ? 1 : 0];
      Const *fill = NULL;
      const Onnx__AttributeProto *a = expand ? NULL : attr_find (node, "value");

      if (dims->rank > 1 || dims->n > PLANNER_MAX_RANK)
        return fail (im, PLANNER_ERROR_SHAPE_MISMATCH, "node %s (%s): a shape of more than %d dims",
                     node_label (node), op, PLANNER_MAX_RANK),
               NULL;
      rank = dims->n;
      for (guint d = 0; d < rank; d++)
        {
          shape[d] = dims->i[d];
          if (shape[d] < 0 || shape[d] > MAX_DIM)
            return fail (im, PLANNER_ERROR_SHAPE_MISMATCH,
                         "node %s (%s): dim %u is %" G_GINT64_FORMAT, node_label (node), op, d,
                         shape[d]),
                   NULL;
        }
      if (expand)
        {
          const Const *both[2] = { in[0], NULL };
          Const target = { .dtype = in[0]->dtype, .rank = rank };

          memcpy (target.shape, shape, sizeof shape);
          both[1] = &target;
          if (!broadcast_shapes (im, node, both, 2, &rank, shape))
            return NULL;
        }
      else if (a != NULL && a->t != NULL
               && (fill = const_from_tensor (im, a->t, node_label (node))) == NULL)
        return NULL;
      c = fold_new (im, node,
                    expand         ? in[0]->dtype
                    : fill != NULL ? fill->dtype
                                   : ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT,
                    rank, shape);
      for (gint64 k = 0; c != NULL && k < c->n; k++)
        {
          const Const *from = expand ? in[0] : fill;
          gint64 offset = from != NULL && from->i != NULL && from->n > 0
                              ? (expand ? broadcast_offset (from, shape, rank, k) : 0)
                              : -1;

          c->i[k] = offset >= 0 ? from->i[offset] : 0;
          c->f[k] = offset >= 0 ? from->f[offset] : 0;
        }
      const_free (fill);
      return c;
    }
  *handled = FALSE;
  return NULL;
}

/* Shape and Size of a tensor whose shape is known, and every foldable op on constants:
 * returns TRUE when @n was folded (its outputs are constants), FALSE when it is not foldable
 * (or the error is set). */
static gboolean
try_fold (Importer *im, int n)
{
  Node *node = &im->nodes[n];
  const Const *in[PLANNER_MAX_OPERANDS] = { NULL };
  Const *c = NULL;
  gboolean handled = FALSE;

  if (node->n_out < 1 || node->out[0] < 0 || node->n_in > PLANNER_MAX_OPERANDS)
    return FALSE;
  if ((g_str_equal (node->op, "Shape") || g_str_equal (node->op, "Size")) && node->n_in == 1
      && node->in[0] >= 0 && value_known (im, node->in[0]))
    {
      const Value *x = resolved (im, node->in[0]);
      gint64 r = x->rank, start = attr_int (node, "start", 0), end = attr_int (node, "end", r);

      if (g_str_equal (node->op, "Size"))
        {
          c = const_new (ONNX__TENSOR_PROTO__DATA_TYPE__INT64, 0, NULL, 1);
          c->i[0] = numel_of (x->shape, x->rank);
          c->f[0] = c->i[0];
        }
      else
        {
          start = CLAMP (start < 0 ? start + r : start, 0, r);
          end = CLAMP (end < 0 ? end + r : end, 0, r);
          gint64 count = MAX (end - start, 0);

          c = const_new (ONNX__TENSOR_PROTO__DATA_TYPE__INT64, 1, &count, count);
          for (gint64 k = 0; k < count; k++)
            c->f[k] = c->i[k] = x->shape[start + k];
        }
      value_at (im, node->out[0])->constant = c;
      return TRUE;
    }
  for (guint i = 0; i < node->n_in; i++)
    if (node->in[i] >= 0 && (in[i] = const_data (im, node->in[i])) == NULL)
      return FALSE;
  if (node->n_in == 0 || in[0] == NULL || node->n_out != 1)
    return FALSE;
  for (guint e = 0; e < G_N_ELEMENTS (elementwise_ops) && !handled; e++)
    if (g_str_equal (node->op, elementwise_ops[e].op))
      {
        handled = TRUE;
        if (node->n_in != elementwise_ops[e].arity)
          return FALSE;
        for (guint i = 0; i < node->n_in; i++)
          if (in[i] == NULL)
            return FALSE;
        c = fold_elementwise (im, node, e, in);
      }
  if (!handled)
    {
      /* Optional inputs stay NULL; the structural folds read only the ones they need. */
      for (guint i = 1; i < node->n_in && !g_str_equal (node->op, "Slice"); i++)
        if (in[i] == NULL)
          return FALSE;
      c = fold_structural (im, n, in, &handled);
    }
  if (!handled || c == NULL)
    return FALSE;
  if (c->i == NULL)
    {
      const_free (c);
      return FALSE;
    }
  value_at (im, node->out[0])->constant = c;
  return TRUE;
}

/* ---- Mapped ops. */

/* Node @n's output is its input, the same tensor (Identity, a whole Slice, a view to the
 * shape it has). */
static gboolean
alias_output (Importer *im, int n)
{
  value_at (im, im->nodes[n].out[0])->alias = resolved_index (im, im->nodes[n].in[0]);
  return TRUE;
}

typedef struct MapEntry MapEntry;
typedef gboolean (*EmitFunc) (Importer *im, int n, const MapEntry *entry);

struct MapEntry
{
  const char *op;
  PlannerOpType type;
  EmitFunc emit;
  gboolean principal;
};

static gboolean
input_rank (Importer *im, int n, guint i, guint *rank, gint64 *shape)
{
  const Node *node = &im->nodes[n];

  if (i >= node->n_in || node->in[i] < 0 || !value_known (im, node->in[i]))
    return fail (im, PLANNER_ERROR_INVALID_GRAPH, "node %s (%s): input %u is missing",
                 node_label (node), node->op, i);
  *rank = resolved (im, node->in[i])->rank;
  if (shape != NULL)
    memcpy (shape, resolved (im, node->in[i])->shape, sizeof (gint64) * PLANNER_MAX_RANK);
  return TRUE;
}

/* Outputs after the first that something uses (a LayerNormalization's mean, a Dropout's
 * mask) are refused: the Shardscope op has one output. */
static gboolean
only_first_output (Importer *im, int n)
{
  const Node *node = &im->nodes[n];

  for (guint o = 1; o < node->n_out; o++)
    if (node->out[o] >= 0
        && (value_at (im, node->out[o])->consumers->len > 0
            || value_at (im, node->out[o])->is_output))
      return fail (
          im, PLANNER_ERROR_UNKNOWN_OP_TYPE,
          "node %s (%s): output %u (%s) is used; only the first output of a %s is modelled",
          node_label (node), node->op, o, value_at (im, node->out[o])->name, node->op);
  return TRUE;
}

static gboolean
emit_plain (Importer *im, int n, const MapEntry *e, const PlannerOpAttrs *attrs, guint n_inputs)
{
  const Node *node = &im->nodes[n];

  return only_first_output (im, n)
         && emit (im, n, e->type, attrs, node->in, n_inputs, node->out, 1, NULL, e->principal);
}

static gboolean
emit_elementwise (Importer *im, int n, const MapEntry *e)
{
  PlannerOpAttrs attrs;
  char buffer[16];

  planner_op_attrs_init (&attrs);
  if (e->type == PLANNER_OP_GELU)
    attrs.variant = g_str_equal (
        attr_string (&im->nodes[n], "approximate", "none", buffer, sizeof buffer), "tanh");
  for (guint i = 0; i < im->nodes[n].n_in; i++)
    if (im->nodes[n].in[i] < 0)
      return fail (im, PLANNER_ERROR_INVALID_GRAPH, "node %s (%s): input %u is empty",
                   node_label (&im->nodes[n]), im->nodes[n].op, i);
  return emit_plain (im, n, e, &attrs, im->nodes[n].n_in);
}

static gboolean
emit_axis (Importer *im, int n, const MapEntry *e)
{
  const Node *node = &im->nodes[n];
  PlannerOpAttrs attrs;
  guint rank, axis;

  planner_op_attrs_init (&attrs);
  if (!input_rank (im, n, 0, &rank, NULL)
      || !norm_axis (
          im, node,
          attr_int (node, "axis", e->type == PLANNER_OP_SOFTMAX && opset_of (im) >= 13 ? -1 : 1),
          rank, &axis))
    return FALSE;
  /* Before opset 13 Softmax flattened the dims from its axis on. */
  if (e->type == PLANNER_OP_SOFTMAX && opset_of (im) < 13 && axis != rank - 1)
    return fail (im, PLANNER_ERROR_UNKNOWN_OP_TYPE,
                 "node %s (Softmax, opset %d): axis %u of rank %u flattens the dims after it; only "
                 "the last axis is modelled before opset 13",
                 node_label (node), opset_of (im), axis, rank);
  attrs.axis = axis;
  return emit_plain (im, n, e, &attrs, node->n_in);
}

static gboolean
emit_cast (Importer *im, int n, const MapEntry *e)
{
  const Node *node = &im->nodes[n];
  PlannerOpAttrs attrs;
  int to = attr_int (node, "to", 0);

  planner_op_attrs_init (&attrs);
  if (!planner_dtype_of (to, &attrs.dtype))
    return fail (im, PLANNER_ERROR_UNKNOWN_OP_TYPE,
                 "node %s (Cast): a cast to %s; tensors are float, float16, bfloat16 or int64",
                 node_label (node), dtype_name (to));
  return emit_plain (im, n, e, &attrs, 1);
}

static gboolean
emit_view (Importer *im, int n, const MapEntry *e)
{
  PlannerOpAttrs attrs;
  guint in_rank, rank;
  gint64 in_shape[PLANNER_MAX_RANK], shape[PLANNER_MAX_RANK];

  planner_op_attrs_init (&attrs);
  if (!input_rank (im, n, 0, &in_rank, in_shape)
      || !view_shape (im, n, in_rank, in_shape, &rank, shape))
    return FALSE;
  if (rank == in_rank && memcmp (shape, in_shape, rank * sizeof *shape) == 0)
    {
      /* A view of the shape the tensor has: the same tensor. */
      return alias_output (im, n);
    }
  attrs.n_ints = rank;
  memcpy (attrs.ints, shape, rank * sizeof *shape);
  return emit_plain (im, n, e, &attrs, 1);
}

static gboolean
emit_transpose (Importer *im, int n, const MapEntry *e)
{
  PlannerOpAttrs attrs;
  guint rank;
  gboolean present;

  planner_op_attrs_init (&attrs);
  if (!input_rank (im, n, 0, &rank, NULL)
      || !int_list (im, n, "perm", G_MAXUINT, attrs.ints, &attrs.n_ints, &present))
    return FALSE;
  if (!present)
    for (attrs.n_ints = 0; attrs.n_ints < rank; attrs.n_ints++)
      attrs.ints[attrs.n_ints] = rank - 1 - attrs.n_ints;
  return emit_plain (im, n, e, &attrs, 1);
}

static gboolean
emit_split (Importer *im, int n, const MapEntry *e)
{
  const Node *node = &im->nodes[n];
  PlannerOpAttrs attrs;
  guint rank, axis;
  gint64 shape[PLANNER_MAX_RANK];
  gboolean present;

  planner_op_attrs_init (&attrs);
  if (!input_rank (im, n, 0, &rank, shape)
      || !norm_axis (im, node, attr_int (node, "axis", 0), rank, &axis)
      || !int_list (im, n, "split", 1, attrs.ints, &attrs.n_ints, &present))
    return FALSE;
  if (node->n_out < 1 || node->n_out > PLANNER_MAX_OPERANDS)
    return fail (im, PLANNER_ERROR_SHAPE_MISMATCH,
                 "node %s (Split): %u outputs; 1 to %d are modelled", node_label (node),
                 node->n_out, PLANNER_MAX_OPERANDS);
  if (!present)
    {
      /* Equal parts, the last one smaller when they do not divide (opset 18's num_outputs). */
      gint64 part = (shape[axis] + node->n_out - 1) / node->n_out;

      attrs.n_ints = node->n_out;
      for (guint o = 0; o < node->n_out; o++)
        attrs.ints[o] = MAX (MIN (part, shape[axis] - (gint64)o * part), 0);
    }
  attrs.axis = axis;
  return emit (im, n, e->type, &attrs, node->in, 1, node->out, node->n_out, NULL, FALSE);
}

static gboolean
emit_slice (Importer *im, int n, const MapEntry *e)
{
  const Node *node = &im->nodes[n];
  PlannerOpAttrs attrs;
  guint rank;
  gint64 shape[PLANNER_MAX_RANK];
  SliceSpec spec;
  int axis = -1;

  planner_op_attrs_init (&attrs);
  if (!input_rank (im, n, 0, &rank, shape) || !slice_spec (im, n, rank, shape, &spec))
    return FALSE;
  for (guint d = 0; d < rank; d++)
    if (spec.start[d] != 0 || spec.count[d] != shape[d] || spec.step[d] != 1)
      {
        if (axis >= 0 || spec.step[d] != 1)
          return fail (im, PLANNER_ERROR_UNKNOWN_OP_TYPE,
                       "node %s (Slice): %s; a Slice is modelled on one axis with step 1",
                       node_label (node),
                       axis >= 0 ? "it slices several axes" : "a step other than 1");
        axis = d;
      }
  if (axis < 0)
    {
      /* The whole tensor: the same tensor. */
      return alias_output (im, n);
    }
  attrs.axis = axis;
  attrs.start = spec.start[axis];
  attrs.end = spec.start[axis] + spec.count[axis];
  return emit_plain (im, n, e, &attrs, 1);
}

static gboolean
emit_reduce (Importer *im, int n, const MapEntry *e)
{
  const Node *node = &im->nodes[n];
  PlannerOpAttrs attrs;
  gboolean present;

  planner_op_attrs_init (&attrs);
  if (!int_list (im, n, "axes", 1, attrs.ints, &attrs.n_ints, &present))
    return FALSE;
  if (attrs.n_ints == 0 && attr_int (node, "noop_with_empty_axes", 0))
    {
      return alias_output (im, n);
    }
  attrs.keepdims = attr_int (node, "keepdims", 1) != 0;
  return emit_plain (im, n, e, &attrs, 1);
}

static gboolean
emit_matmul (Importer *im, int n, const MapEntry *e)
{
  const Node *node = &im->nodes[n];
  PlannerOpAttrs attrs;
  guint rank_b;

  planner_op_attrs_init (&attrs);
  if (node->n_in != 2 || !input_rank (im, n, 1, &rank_b, NULL))
    return FALSE;
  return emit (im, n, rank_b == 2 ? PLANNER_OP_MATMUL : PLANNER_OP_BATCH_MATMUL, &attrs, node->in,
               2, node->out, 1, NULL, FALSE);
}

static gboolean
emit_gemm (Importer *im, int n, const MapEntry *e)
{
  const Node *node = &im->nodes[n];
  PlannerOpAttrs attrs;
  int inputs[3];
  double alpha = attr_float (node, "alpha", 1), beta = attr_float (node, "beta", 1);

  if (alpha != 1 || (beta != 1 && node->n_in > 2 && node->in[2] >= 0))
    return fail (im, PLANNER_ERROR_UNKNOWN_OP_TYPE,
                 "node %s (Gemm): alpha %g, beta %g; a Linear is modelled with alpha = beta = 1 "
                 "(scale the weight and the bias in the file instead)",
                 node_label (node), alpha, beta);
  if (node->n_in < 2)
    return fail (im, PLANNER_ERROR_INVALID_GRAPH, "node %s (Gemm): fewer than 2 inputs",
                 node_label (node));
  memcpy (inputs, node->in, MIN (node->n_in, 3) * sizeof *inputs);
  if (attr_int (node, "transA", 0))
    {
      /* A transposed: a Transpose op before the Linear. */
      PlannerOpAttrs perm;
      int tmp = value_add (im, "");
      Value *t;

      planner_op_attrs_init (&perm);
      perm.n_ints = 2;
      perm.ints[0] = 1;
      perm.ints[1] = 0;
      if (!emit (im, n, PLANNER_OP_TRANSPOSE, &perm, inputs, 1, &tmp, 1, "transpose_a", FALSE))
        return FALSE;
      t = value_at (im, tmp);
      inputs[0] = tmp;
      (void)t;
    }
  planner_op_attrs_init (&attrs);
  attrs.transpose_b = attr_int (node, "transB", 0) != 0;
  return emit (im, n, PLANNER_OP_MATMUL, &attrs, inputs, node->n_in > 2 && node->in[2] >= 0 ? 3 : 2,
               node->out, 1, NULL, TRUE);
}

static gboolean
emit_gather (Importer *im, int n, const MapEntry *e)
{
  const Node *node = &im->nodes[n];
  PlannerOpAttrs attrs;
  int inputs[2] = { in_at (im, n, 1), in_at (im, n, 0) };

  planner_op_attrs_init (&attrs);
  if (node->n_in != 2 || !is_parameter (im, node->in[0], 2) || attr_int (node, "axis", 0) != 0)
    return fail (im, PLANNER_ERROR_UNKNOWN_OP_TYPE,
                 "node %s (Gather): only an embedding lookup is modelled (rows of a 2-D "
                 "initializer, axis 0), or a Gather on constants (folded)",
                 node_label (node));
  return emit (im, n, PLANNER_OP_EMBEDDING, &attrs, inputs, 2, node->out, 1, NULL, TRUE);
}

static gboolean
emit_conv (Importer *im, int n, const MapEntry *e)
{
  const Node *node = &im->nodes[n];
  PlannerOpAttrs attrs;
  gint64 strides[PLANNER_MAX_OPERANDS], pads[PLANNER_MAX_OPERANDS], dilations[PLANNER_MAX_OPERANDS];
  guint n_strides, n_pads, n_dilations, rank;
  gboolean present;
  char buffer[16];

  planner_op_attrs_init (&attrs);
  if (!input_rank (im, n, 0, &rank, NULL)
      || !int_list (im, n, "strides", G_MAXUINT, strides, &n_strides, &present)
      || !int_list (im, n, "pads", G_MAXUINT, pads, &n_pads, &present)
      || !int_list (im, n, "dilations", G_MAXUINT, dilations, &n_dilations, &present))
    return FALSE;
  for (guint k = 0; k < n_dilations; k++)
    if (dilations[k] != 1)
      return fail (im, PLANNER_ERROR_UNKNOWN_OP_TYPE, "node %s (Conv): dilations other than 1",
                   node_label (node));
  if (rank != 4 || attr_int (node, "group", 1) != 1
      || !g_str_equal (attr_string (node, "auto_pad", "NOTSET", buffer, sizeof buffer), "NOTSET")
      || (n_pads == 4 && (pads[0] != pads[2] || pads[1] != pads[3])) || (n_pads != 0 && n_pads != 4)
      || (n_strides != 0 && n_strides != 2))
    return fail (im, PLANNER_ERROR_UNKNOWN_OP_TYPE,
                 "node %s (Conv): only a 2-D convolution with one group, explicit symmetric pads "
                 "and dilation 1 is modelled",
                 node_label (node));
  attrs.n_ints = 4;
  attrs.ints[0] = n_strides ? strides[0] : 1;
  attrs.ints[1] = n_strides ? strides[1] : 1;
  attrs.ints[2] = n_pads ? pads[0] : 0;
  attrs.ints[3] = n_pads ? pads[1] : 0;
  return emit (im, n, PLANNER_OP_CONV2D, &attrs, node->in,
               node->n_in > 2 && node->in[2] >= 0 ? 3 : MIN (node->n_in, 2), node->out, 1, NULL,
               TRUE);
}

static gboolean
emit_norm (Importer *im, int n, const MapEntry *e)
{
  const Node *node = &im->nodes[n];
  PlannerOpAttrs attrs;
  guint rank, axis;
  guint n_inputs = e->type == PLANNER_OP_RMS_NORM ? 2 : MIN (node->n_in, 3);

  planner_op_attrs_init (&attrs);
  if (!input_rank (im, n, 0, &rank, NULL)
      || !norm_axis (im, node, attr_int (node, "axis", -1), rank, &axis))
    return FALSE;
  if (axis != rank - 1 || node->n_in < 2 || (n_inputs == 3 && node->in[2] < 0))
    return fail (im, PLANNER_ERROR_UNKNOWN_OP_TYPE,
                 "node %s (%s): a norm over the last dim with a scale%s is modelled",
                 node_label (node), node->op,
                 e->type == PLANNER_OP_LAYER_NORM ? " and a bias" : "");
  attrs.eps = attr_float (node, "epsilon", 1e-5);
  return emit_plain (im, n, e, &attrs, n_inputs);
}

static gboolean
emit_attention (Importer *im, int n, const MapEntry *e)
{
  const Node *node = &im->nodes[n];
  PlannerOpAttrs attrs;
  guint rank;
  gint64 shape[PLANNER_MAX_RANK];

  planner_op_attrs_init (&attrs);
  if (!input_rank (im, n, 0, &rank, shape))
    return FALSE;
  if (rank != 4 || node->n_in < 3
      || (node->n_in > 4 && (node->in[4] >= 0 || (node->n_in > 5 && node->in[5] >= 0)))
      || attr_float (node, "softcap", 0) != 0)
    return fail (
        im, PLANNER_ERROR_UNKNOWN_OP_TYPE,
        "node %s (Attention): 4-D q, k and v without a past key/value cache or softcap are "
        "modelled",
        node_label (node));
  attrs.causal = attr_int (node, "is_causal", 0) != 0
                 || (node->n_in > 3 && node->in[3] >= 0 && mask_is_causal (im, node->in[3]));
  attrs.scale = attr_float (node, "scale", 0);
  if (fabs (attrs.scale - 1 / sqrt ((double)shape[3])) <= 1e-6 * attrs.scale)
    attrs.scale = 0;
  return emit_plain (im, n, e, &attrs, 3);
}

static const MapEntry map[] = {
  { "Add", PLANNER_OP_ADD, emit_elementwise },
  { "Sub", PLANNER_OP_SUB, emit_elementwise },
  { "Mul", PLANNER_OP_MUL, emit_elementwise },
  { "Div", PLANNER_OP_DIV, emit_elementwise },
  { "Relu", PLANNER_OP_RELU, emit_elementwise, TRUE },
  { "Gelu", PLANNER_OP_GELU, emit_elementwise, TRUE },
  { "Tanh", PLANNER_OP_TANH, emit_elementwise, TRUE },
  { "Exp", PLANNER_OP_EXP, emit_elementwise },
  { "Neg", PLANNER_OP_NEG, emit_elementwise },
  { "Softmax", PLANNER_OP_SOFTMAX, emit_axis },
  { "Concat", PLANNER_OP_CONCAT, emit_axis },
  { "Cast", PLANNER_OP_CAST, emit_cast },
  { "Reshape", PLANNER_OP_RESHAPE, emit_view },
  { "Unsqueeze", PLANNER_OP_RESHAPE, emit_view },
  { "Squeeze", PLANNER_OP_RESHAPE, emit_view },
  { "Flatten", PLANNER_OP_RESHAPE, emit_view },
  { "Transpose", PLANNER_OP_TRANSPOSE, emit_transpose },
  { "Split", PLANNER_OP_SPLIT, emit_split },
  { "Slice", PLANNER_OP_SLICE, emit_slice },
  { "ReduceSum", PLANNER_OP_REDUCE_SUM, emit_reduce },
  { "ReduceMean", PLANNER_OP_REDUCE_MEAN, emit_reduce },
  { "MatMul", PLANNER_OP_MATMUL, emit_matmul },
  { "Gemm", PLANNER_OP_MATMUL, emit_gemm },
  { "Gather", PLANNER_OP_EMBEDDING, emit_gather },
  { "Conv", PLANNER_OP_CONV2D, emit_conv },
  { "LayerNormalization", PLANNER_OP_LAYER_NORM, emit_norm, TRUE },
  { "SimplifiedLayerNormalization", PLANNER_OP_RMS_NORM, emit_norm, TRUE },
  { "RMSNormalization", PLANNER_OP_RMS_NORM, emit_norm, TRUE },
  { "Attention", PLANNER_OP_SDPA, emit_attention },
};

/* Ops that are mapped only inside a subgraph, and what it is. */
static const struct
{
  const char *op;
  const char *hint;
} only_inside[] = {
  { "Sigmoid", "only x * Sigmoid(x) (SiLU) is mapped" },
  { "Erf", "only the erf GeLU, 0.5 x (1 + Erf(x / sqrt 2)), is mapped" },
  { "Pow", "only inside RMSNorm (x / sqrt(mean(x^2) + eps)) or the tanh GeLU" },
  { "Sqrt", "only inside RMSNorm" },
  { "Reciprocal", "only inside RMSNorm" },
  { "Cos", "only in a rotary embedding's tables" },
  { "Sin", "only in a rotary embedding's tables" },
  { "Expand", "only in GQA's repeat_kv before attention, or on constants" },
  { "Where", "only in attention masks, or on constants" },
};

static gboolean
refuse_unmapped (Importer *im, int n)
{
  const Node *node = &im->nodes[n];
  const char *domain = node->proto->domain != NULL && node->proto->domain[0] != '\0'
                           ? node->proto->domain
                           : "ai.onnx";
  g_autoptr (GString) mapped = g_string_new (NULL);
  const char *hint = NULL;

  for (guint k = 0; k < G_N_ELEMENTS (only_inside); k++)
    if (g_str_equal (only_inside[k].op, node->op))
      hint = only_inside[k].hint;
  for (guint k = 0; k < G_N_ELEMENTS (map); k++)
    g_string_append_printf (mapped, "%s%s", k ? ", " : "", map[k].op);
  return fail (
      im, PLANNER_ERROR_UNKNOWN_OP_TYPE,
      "node %s: ONNX op %s (domain %s, opset %d) has no Shardscope op type%s%s; mapped: %s; "
      "also RMSNorm, SiLU, GeLU, rotary and attention subgraphs as exporters write them, "
      "and any op on constants (folded)",
      node_label (node), node->op, domain, opset_of (im), hint ? ": " : "", hint ? hint : "",
      mapped->str);
}

/* ---- Claimed subgraphs. */

/* The rotary base from the cos table's constants: inv_freq[i] = theta^(-2i/d), or a table of
 * angles position x inv_freq whose row 1 is inv_freq twice. */
static gboolean
rotary_theta (Importer *im, int n, int cos, gint64 d, double *theta)
{
  g_autoptr (GArray) stack = g_array_new (FALSE, FALSE, sizeof (int));
  g_autoptr (GHashTable) seen = g_hash_table_new (NULL, NULL);
  gint64 half = d / 2;

  if (cos >= 0)
    g_array_append_val (stack, cos);
  while (stack->len > 0 && g_hash_table_size (seen) < 256)
    {
      int v = g_array_index (stack, int, stack->len - 1);
      const Value *value = value_at (im, v);
      const Const *c = value->constant;
      const double *inv = NULL;

      g_array_set_size (stack, stack->len - 1);
      if (g_hash_table_contains (seen, GINT_TO_POINTER (v + 1)))
        continue;
      g_hash_table_add (seen, GINT_TO_POINTER (v + 1));
      if (c != NULL && c->f != NULL && dtype_is_float (c->dtype) && half >= 2)
        {
          if (c->n == half)
            inv = c->f;
          else if (c->rank >= 2 && c->shape[c->rank - 1] == d && c->n >= 2 * d && c->f[1] == 0)
            inv = c->f + d;
        }
      if (inv != NULL)
        {
          *theta = pow (1 / inv[1], (double)d / 2);
          /* The table is float32: a whole base (10000, 500000) that gives it is the base. */
          {
            double whole = nearbyint (*theta);
            gboolean exact = TRUE;

            for (gint64 k = 0; k < half && exact; k++)
              exact = fabs (inv[k] - (float)pow (whole, -2.0 * k / d)) <= 1e-6 * inv[k];
            if (exact)
              *theta = whole;
          }
          for (gint64 k = 0; k < half; k++)
            if (!(fabs (inv[k] - pow (*theta, -2.0 * k / d)) <= 1e-4 * pow (*theta, -2.0 * k / d)))
              return fail (im, PLANNER_ERROR_UNKNOWN_OP_TYPE,
                           "node %s: rotary frequency %" G_GINT64_FORMAT
                           " is %g, not theta^(-2i/d) "
                           "for theta %g: a scaled rotary embedding (rope_scaling) is not modelled",
                           node_label (&im->nodes[n]), k, inv[k], *theta);
          return TRUE;
        }
      if (value->producer >= 0)
        for (guint i = 0; i < im->nodes[value->producer].n_in && stack->len < 65536; i++)
          if (im->nodes[value->producer].in[i] >= 0)
            g_array_append_val (stack, im->nodes[value->producer].in[i]);
    }
  return fail (im, PLANNER_ERROR_UNKNOWN_OP_TYPE,
               "node %s: a rotary embedding whose frequencies are not constants of the file",
               node_label (&im->nodes[n]));
}

static gboolean
check_half_slice (Importer *im, int slice, guint rank, const gint64 *shape, gboolean upper)
{
  SliceSpec spec;
  gint64 d = shape[rank - 1], half = d / 2;

  if (!slice_spec (im, slice, rank, shape, &spec))
    return FALSE;
  for (guint k = 0; k + 1 < rank; k++)
    if (spec.count[k] != shape[k])
      return FALSE;
  return d % 2 == 0 && spec.step[rank - 1] == 1 && spec.start[rank - 1] == (upper ? half : 0)
         && spec.count[rank - 1] == half;
}

static gboolean
emit_fused (Importer *im, int n)
{
  const Fused *f = &g_array_index (im->fused, Fused, im->nodes[n].fused);
  PlannerOpAttrs attrs;
  guint rank;
  gint64 shape[PLANNER_MAX_RANK];
  int out = f->output;

  planner_op_attrs_init (&attrs);
  if (!value_known (im, f->inputs[0]))
    return fail (im, PLANNER_ERROR_INVALID_GRAPH, "node %s: its input has no shape",
                 node_label (&im->nodes[n]));
  rank = resolved (im, f->inputs[0])->rank;
  memcpy (shape, resolved (im, f->inputs[0])->shape, sizeof shape);
  switch (f->kind)
    {
    case FUSED_LINEAR:
      {
        attrs.transpose_b = f->transpose_b;
        attrs.heads = im->heads[n];
        return emit (im, n, PLANNER_OP_MATMUL, &attrs, f->inputs, f->n_inputs, &out, 1, NULL, TRUE);
      }
    case FUSED_RMS_NORM:
      {
        gint64 axes[PLANNER_MAX_OPERANDS];
        guint count;
        gboolean present;

        if (!int_list (im, f->check[0], "axes", 1, axes, &count, &present))
          return FALSE;
        if (count != 1 || (axes[0] != -1 && axes[0] != (gint64)rank - 1)
            || !attr_int (&im->nodes[f->check[0]], "keepdims", 1))
          return fail (im, PLANNER_ERROR_UNKNOWN_OP_TYPE,
                       "node %s: an RMSNorm whose mean is not over the last dim",
                       node_label (&im->nodes[f->check[0]]));
        attrs.eps = f->eps;
        return emit (im, n, PLANNER_OP_RMS_NORM, &attrs, f->inputs, 2, &out, 1, NULL, TRUE);
      }
    case FUSED_SILU:
    case FUSED_GELU:
      attrs.variant = f->variant;
      return emit (im, n, f->kind == FUSED_SILU ? PLANNER_OP_SILU : PLANNER_OP_GELU, &attrs,
                   f->inputs, 1, &out, 1, NULL, TRUE);
    case FUSED_ROTARY:
      if (rank < 1 || !check_half_slice (im, f->check[0], rank, shape, TRUE)
          || !check_half_slice (im, f->check[1], rank, shape, FALSE))
        return im->error != NULL
                   ? FALSE
                   : fail (im, PLANNER_ERROR_UNKNOWN_OP_TYPE,
                           "node %s: a rotate-half whose slices are not the halves of the last dim",
                           node_label (&im->nodes[n]));
      if (!rotary_theta (im, n, f->check[2], shape[rank - 1], &attrs.theta))
        return FALSE;
      return emit (im, n, PLANNER_OP_ROTARY_EMBEDDING, &attrs, f->inputs, 1, &out, 1, "rotary",
                   FALSE);
    case FUSED_SDPA:
      attrs.causal = f->causal;
      attrs.scale = rank == 4 && fabs (f->scale - 1 / sqrt ((double)shape[3])) <= 1e-6 * f->scale
                        ? 0
                        : f->scale;
      if (!emit (im, n, PLANNER_OP_SDPA, &attrs, f->inputs, 3, &out, 1, "sdpa", FALSE))
        return FALSE;
      /* repeat_kv's k and v, [B, query heads, S, D], for the Shape nodes that read them. */
      for (guint c = 0; c < 2; c++)
        if (f->check[c] >= 0 && rank == 4)
          {
            Value *wide = value_at (im, f->check[c]);
            const Value *narrow = resolved (im, f->inputs[1 + c]);

            wide->known = TRUE;
            wide->dtype = narrow->dtype;
            wide->rank = 4;
            memcpy (wide->shape, narrow->shape, sizeof wide->shape);
            wide->shape[1] = shape[1];
          }
      return TRUE;
    default:
      g_assert_not_reached ();
    }
}

static gboolean
build_node (Importer *im, int n)
{
  Node *node = &im->nodes[n];
  const char *domain = node->proto->domain != NULL ? node->proto->domain : "";

  if (node->fused >= 0)
    return emit_fused (im, n);
  if (g_str_equal (node->op, "Constant"))
    return TRUE;
  if (try_fold (im, n) || im->error != NULL)
    return im->error == NULL;
  if ((g_str_equal (node->op, "Shape") || g_str_equal (node->op, "Size")) && node->n_in == 1
      && node->in[0] >= 0)
    return fail (im, PLANNER_ERROR_UNKNOWN_OP_TYPE,
                 "node %s (%s) reads the shape of %s, which lies inside a subgraph built as one op "
                 "and has no shape of its own",
                 node_label (node), node->op, value_at (im, node->in[0])->name);
  if (node->n_out < 1 || node->out[0] < 0)
    return fail (im, PLANNER_ERROR_INVALID_GRAPH, "node %s (%s) has no output", node_label (node),
                 node->op);
  if (domain[0] != '\0' && !g_str_equal (domain, "ai.onnx")
      && !(g_str_equal (domain, "com.microsoft")
           && g_str_equal (node->op, "SimplifiedLayerNormalization")))
    return refuse_unmapped (im, n);
  /* The same tensor under another name. */
  if ((g_str_equal (node->op, "Identity") || g_str_equal (node->op, "Dropout")
       || (g_str_equal (node->op, "Cast") && node->in[0] >= 0 && value_known (im, node->in[0])
           && resolved (im, node->in[0])->dtype == attr_int (node, "to", 0)))
      && node->n_in >= 1 && node->in[0] >= 0)
    {
      if (!only_first_output (im, n))
        return FALSE;
      return alias_output (im, n);
    }
  for (guint k = 0; k < G_N_ELEMENTS (map); k++)
    if (g_str_equal (map[k].op, node->op))
      return map[k].emit (im, n, &map[k]);
  return refuse_unmapped (im, n);
}

static gboolean
build_outputs (Importer *im)
{
  const Onnx__GraphProto *g = im->graph;

  for (guint k = 0; k < g->n_output; k++)
    {
      int v = value_find (im, g->output[k]->name);
      const Onnx__TypeProto *type = g->output[k]->type;
      const Value *value;
      int t;

      if (value_at (im, v)->producer >= 0 && !im->nodes[value_at (im, v)->producer].live)
        return fail (im, PLANNER_ERROR_INVALID_GRAPH, "graph output %s was not built",
                     value_at (im, v)->name);
      if ((t = tensor_of (im, v, &im->nodes[MAX (value_at (im, v)->producer, 0)])) < 0)
        return FALSE;
      value = resolved (im, v);
      /* What the file declares must be what the rules inferred. */
      if (type != NULL && type->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE
          && type->tensor_type != NULL && type->tensor_type->shape != NULL)
        {
          const Onnx__TensorShapeProto *shape = type->tensor_type->shape;
          gboolean same = shape->n_dim == value->rank;

          for (guint d = 0; same && d < shape->n_dim; d++)
            same = shape->dim[d]->value_case != ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE
                   || shape->dim[d]->dim_value == value->shape[d];
          if (!same)
            {
              g_autofree char *got = NULL;
              g_autoptr (GString) s = g_string_new ("[");

              for (guint d = 0; d < value->rank; d++)
                g_string_append_printf (s, "%s%" G_GINT64_FORMAT, d ? "," : "", value->shape[d]);
              g_string_append_c (s, ']');
              got = g_string_free (g_steal_pointer (&s), FALSE);
              return fail (im, PLANNER_ERROR_SHAPE_MISMATCH,
                           "graph output %s is declared with %zu dims of other sizes than the %s "
                           "the ops give",
                           value_at (im, v)->name, shape->n_dim, got);
            }
        }
      planner_graph_mark_output (im->planner, t);
    }
  return TRUE;
}

/* Pass 3 into a new planner graph; the state of an earlier build is dropped. */
static gboolean
build_planner (Importer *im)
{
  g_clear_object (&im->planner);
  im->planner = planner_graph_new ();
  g_hash_table_remove_all (im->names);
  g_hash_table_remove_all (im->suffixes);
  im->used_batch = im->used_seq = FALSE;
  for (guint v = 0; v < im->values->len; v++)
    {
      Value *value = value_at (im, v);

      value->tensor = value->alias = -1;
      value->known = FALSE;
      if (value->producer >= 0 && !g_str_equal (im->nodes[value->producer].op, "Constant"))
        g_clear_pointer (&value->constant, const_free);
    }
  for (guint v = 0; v < im->values->len && im->error == NULL; v++)
    if (value_at (im, v)->input != NULL && !resolve_input (im, v))
      return FALSE;
  for (guint k = 0; k < im->n_nodes && im->error == NULL; k++)
    if (im->nodes[k].live && (im->nodes[k].fused >= 0 || !im->nodes[k].claimed))
      build_node (im, k);
  return im->error == NULL && build_outputs (im);
}

/* Heads of each Linear: its output viewed as [..., heads, head_dim] and the heads moved before
 * the sequence (HF's view + transpose(1, 2)). Returns whether any Linear has them. */
static gboolean
infer_heads (Importer *im)
{
  gboolean any = FALSE;

  for (guint k = 0; k < im->n_nodes; k++)
    {
      const Fused *f
          = im->nodes[k].fused >= 0 ? &g_array_index (im->fused, Fused, im->nodes[k].fused) : NULL;
      const PlannerTensor *out, *view_out;
      const PlannerOp *view, *swap;

      if (f == NULL || f->kind != FUSED_LINEAR || resolved (im, f->output)->tensor < 0)
        continue;
      out = planner_graph_get_tensor (im->planner, resolved (im, f->output)->tensor);
      if (out->consumers->len != 1)
        continue;
      view = planner_graph_get_op (im->planner, g_array_index (out->consumers, PlannerUse, 0).op);
      if (view->type != PLANNER_OP_RESHAPE || view->attrs.n_ints != 4 || out->rank != 3
          || view->attrs.ints[2] * view->attrs.ints[3] != out->shape[2])
        continue;
      view_out = planner_graph_get_tensor (im->planner, view->outputs[0]);
      if (view_out->consumers->len != 1)
        continue;
      swap = planner_graph_get_op (im->planner,
                                   g_array_index (view_out->consumers, PlannerUse, 0).op);
      if (swap->type != PLANNER_OP_TRANSPOSE || swap->attrs.n_ints != 4 || swap->attrs.ints[0] != 0
          || swap->attrs.ints[1] != 2 || swap->attrs.ints[2] != 1 || swap->attrs.ints[3] != 3)
        continue;
      im->heads[k] = view->attrs.ints[2];
      any = TRUE;
    }
  return any;
}

static PlannerGraph *
import_model (const guint8 *data, gsize size, const char *what, const char *folder,
              const PlannerModelOptions *options, const char *source_base, GError **error)
{
  Importer im = { 0 };
  WireBudget budget = { 0, error, what };
  PlannerGraph *graph = NULL;

  if (options != NULL && (options->layers != 0 || options->dtype_set))
    {
      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_PARSE,
                   "%s: an ONNX file has its own layers and dtypes; --layers and --dtype do not "
                   "apply to it (--batch and --seq set its symbolic dims)",
                   what);
      return NULL;
    }
  if (size > MAX_FILE_BYTES)
    {
      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_MALFORMED_FILE,
                   "%s: %zu bytes; an ONNX file holds at most 2 GiB (larger models keep their "
                   "weights as external data)",
                   what, size);
      return NULL;
    }
  if (!wire_check (&budget, data, data + size, &onnx__model_proto__descriptor, 0))
    return NULL;
  im.model = onnx__model_proto__unpack (NULL, size, data);
  if (im.model == NULL)
    {
      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_MALFORMED_FILE,
                   "%s: not an ONNX model file (protobuf-c cannot read it as a ModelProto)", what);
      return NULL;
    }
  im.what = what;
  im.folder = folder;
  im.graph = im.model->graph;
  im.opset = 1;
  im.batch = options != NULL && options->batch > 0 ? options->batch : DEFAULT_BATCH;
  im.seq = options != NULL && options->seq > 0 ? options->seq : DEFAULT_SEQ;
  for (guint k = 0; k < im.model->n_opset_import; k++)
    {
      const char *domain = im.model->opset_import[k]->domain;

      if ((domain == NULL || domain[0] == '\0' || g_str_equal (domain, "ai.onnx"))
          && im.model->opset_import[k]->has_version)
        im.opset = im.model->opset_import[k]->version;
    }
  im.values = g_ptr_array_new_with_free_func (value_free);
  im.by_name = g_hash_table_new (g_str_hash, g_str_equal);
  im.fused = g_array_new (FALSE, FALSE, sizeof (Fused));
  im.names = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  im.suffixes = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);

  if (im.graph == NULL)
    fail (&im, PLANNER_ERROR_MALFORMED_FILE, "not an ONNX model file: it has no graph");
  else if (read_graph (&im))
    {
      prefold (&im);
      match_all (&im);
      mark_live (&im);
      im.heads = g_new0 (gint64, MAX (im.n_nodes, 1));
      /* A Linear whose output is split into heads by the Reshape and Transpose after it
       * carries its heads, as the config importer's do; they are known once the graph is
       * built, so it is built again with them. */
      if (build_planner (&im) && infer_heads (&im))
        build_planner (&im);
    }
  if (im.error == NULL && options != NULL
      && ((options->batch > 0 && !im.used_batch) || (options->seq > 0 && !im.used_seq)))
    fail (&im, PLANNER_ERROR_PARSE,
          "--%s applies to no dim: the file's graph inputs have no symbolic %s dim (their sizes "
          "are fixed)",
          options->batch > 0 && !im.used_batch ? "batch" : "seq",
          options->batch > 0 && !im.used_batch ? "batch" : "sequence");
  graph = im.planner;
  if (im.error == NULL)
    {
      g_autoptr (GError) local = NULL;

      if (!planner_graph_check (graph, &local))
        fail (&im, local->code, "%s", local->message);
    }
  if (im.error == NULL)
    {
      g_autofree char *base = g_path_get_basename (what);
      g_autofree char *source = NULL;

      if (g_str_has_suffix (base, ".onnx"))
        base[strlen (base) - 5] = '\0';
      planner_graph_set_name (graph, base);
      if (im.used_batch && im.used_seq)
        source = g_strdup_printf ("%s?batch=%" G_GINT64_FORMAT "&seq=%" G_GINT64_FORMAT,
                                  source_base, im.batch, im.seq);
      else if (im.used_batch || im.used_seq)
        source
            = g_strdup_printf ("%s?%s=%" G_GINT64_FORMAT, source_base,
                               im.used_batch ? "batch" : "seq", im.used_batch ? im.batch : im.seq);
      else
        source = g_strdup (source_base);
      planner_graph_set_source (graph, source);
      graph = g_object_ref (graph);
    }
  else
    graph = NULL;

  for (guint k = 0; k < im.n_nodes; k++)
    {
      g_free (im.nodes[k].in);
      g_free (im.nodes[k].out);
    }
  g_free (im.nodes);
  g_hash_table_unref (im.by_name);
  g_ptr_array_unref (im.values);
  g_array_unref (im.fused);
  g_hash_table_unref (im.names);
  g_hash_table_unref (im.suffixes);
  g_free (im.heads);
  g_clear_object (&im.planner);
  onnx__model_proto__free_unpacked (im.model, NULL);
  if (im.error != NULL)
    {
      g_propagate_error (error, im.error);
      return NULL;
    }
  return graph;
}

PlannerGraph *
planner_onnx_import_data (const guint8 *data, gsize size, const char *what, const char *folder,
                          const PlannerModelOptions *options, GError **error)
{
  g_return_val_if_fail (data != NULL || size == 0, NULL);
  g_return_val_if_fail (what != NULL, NULL);
  g_return_val_if_fail (error == NULL || *error == NULL, NULL);

  return import_model (data != NULL ? data : (const guint8 *)"", size, what, folder, options, what,
                       error);
}

PlannerGraph *
planner_onnx_import_file (const char *path, const PlannerModelOptions *options, GError **error)
{
  g_autoptr (GMappedFile) file = NULL;
  g_autoptr (GError) local = NULL;
  g_autofree char *absolute = NULL;
  g_autofree char *folder = NULL;

  g_return_val_if_fail (path != NULL, NULL);
  g_return_val_if_fail (error == NULL || *error == NULL, NULL);

  if (options != NULL && !planner_model_options_check (options, error))
    return NULL;
  file = g_mapped_file_new (path, FALSE, &local);
  if (file == NULL)
    {
      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_IO, "%s", local->message);
      return NULL;
    }
  absolute = g_canonicalize_filename (path, NULL);
  folder = g_path_get_dirname (absolute);
  return import_model ((const guint8 *)(g_mapped_file_get_contents (file) != NULL
                                            ? g_mapped_file_get_contents (file)
                                            : ""),
                       g_mapped_file_get_length (file), path, folder, options, absolute, error);
}

#else /* !SHARDSCOPE_HAVE_ONNX */

gboolean
planner_onnx_supported (void)
{
  return FALSE;
}

static PlannerGraph *
refuse (const char *what, GError **error)
{
  g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_UNKNOWN_MODEL,
               "%s: this build of Shardscope reads no ONNX files: it was built without protobuf-c "
               "(install libprotobuf-c-dev and protobuf-c-compiler and build with -Donnx=enabled)",
               what);
  return NULL;
}

PlannerGraph *
planner_onnx_import_data (const guint8 *data, gsize size, const char *what, const char *folder,
                          const PlannerModelOptions *options, GError **error)
{
  return refuse (what, error);
}

PlannerGraph *
planner_onnx_import_file (const char *path, const PlannerModelOptions *options, GError **error)
{
  return refuse (path, error);
}

#endif
