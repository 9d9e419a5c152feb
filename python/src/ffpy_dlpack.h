/* ffpy_dlpack.h — the DLPack ABI (v0.8 layout) as the binding exports it.
 *
 * Written from the DLPack specification (dmlc/dlpack, "dlpack.h" v0.8 and the
 * Python array-API protocol `__dlpack__` / `__dlpack_device__`): a producer
 * hands a DLManagedTensor to a consumer inside a PyCapsule named "dltensor";
 * the consumer renames the capsule "used_dltensor" and calls the deleter
 * exactly once when it no longer needs the memory. A capsule that nobody
 * consumed still has its name "dltensor", and its destructor calls the
 * deleter instead. Only the parts fusionflow uses are declared; the layout
 * (field order and types) is the ABI and must not change. */
#ifndef FFPY_DLPACK_H
#define FFPY_DLPACK_H

#include <stdint.h>

#define FFPY_DLPACK_MAJOR 0
#define FFPY_DLPACK_MINOR 8

/* Where the memory lives. Values are the specification's. */
typedef enum {
  kDLCPU = 1,
  kDLCUDA = 2,
  kDLCUDAHost = 3,
} DLDeviceType;

typedef struct {
  DLDeviceType device_type;
  int32_t device_id; /* 0 for the host */
} DLDevice;

/* Type codes. Values are the specification's. */
typedef enum {
  kDLInt = 0U,
  kDLUInt = 1U,
  kDLFloat = 2U,
  kDLBfloat = 4U,
} DLDataTypeCode;

typedef struct {
  uint8_t code;   /* DLDataTypeCode */
  uint8_t bits;   /* bits per lane: 8 for uint8, 32 for float32, 64 for int64 */
  uint16_t lanes; /* 1: scalars */
} DLDataType;

typedef struct {
  void *data;           /* first element minus byte_offset; host memory here */
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t *shape;       /* ndim extents, in elements */
  int64_t *strides;     /* ndim strides, in elements (not bytes); NULL = compact row-major */
  uint64_t byte_offset; /* bytes from data to the first element */
} DLTensor;

typedef struct DLManagedTensor {
  DLTensor dl_tensor;
  void *manager_ctx; /* the producer's: here the owner of the memory */
  void (*deleter)(struct DLManagedTensor *self); /* called once, by the consumer or the capsule */
} DLManagedTensor;

#endif
