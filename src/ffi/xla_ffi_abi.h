/* The part of XLA's FFI C ABI (xla/ffi/api/c_api.h, API version 0.x) the lpmpi handlers use,
 * declared here so that the engine builds without JAX installed: one build serves every
 * jaxlib whose FFI speaks major version 0 (checked: jaxlib 0.9.0, minor 2; 0.10.2, minor 3).
 * Layouts follow XLA's stable ABI: every struct passed across starts with its size, fields are
 * only ever appended (minor versions), enums are C ints.  Only the fields read or written by
 * xla_ffi.c are named; the API's function table is declared up to the last entry used. */
#ifndef LPMPI_XLA_FFI_ABI_H
#define LPMPI_XLA_FFI_ABI_H

#include <stddef.h>
#include <stdint.h>

/* the FFI version the handlers declare in their metadata (the oldest they were tested with) */
#define LPX_API_MAJOR 0
#define LPX_API_MINOR 2

#define LPX_SIZE_UPTO(type, field) (offsetof(type, field) + sizeof(((type *)0)->field))

typedef struct lpx_ext {                 /* XLA_FFI_Extension_Base */
    size_t struct_size;
    int type;                            /* 1: metadata */
    struct lpx_ext *next;
} lpx_ext;
enum { LPX_EXT_METADATA = 1 };

typedef struct {                         /* XLA_FFI_Api_Version */
    size_t struct_size;
    lpx_ext *extension_start;
    int major_version;
    int minor_version;
} lpx_version;

typedef struct lpx_error lpx_error;      /* XLA_FFI_Error (opaque) */

typedef struct {                         /* XLA_FFI_Error_Create_Args */
    size_t struct_size;
    lpx_ext *extension_start;
    const char *message;
    int errc;                            /* XLA_FFI_Error_Code */
} lpx_error_args;
enum { LPX_INVALID_ARGUMENT = 3, LPX_FAILED_PRECONDITION = 9, LPX_ABORTED = 10,
       LPX_UNIMPLEMENTED = 12, LPX_INTERNAL = 13, LPX_DEADLINE_EXCEEDED = 4,
       LPX_RESOURCE_EXHAUSTED = 8, LPX_UNAVAILABLE = 14 };

typedef struct {                         /* XLA_FFI_Stream_Get_Args */
    size_t struct_size;
    lpx_ext *extension_start;
    void *ctx;
    void *stream;                        /* out */
} lpx_stream_args;

typedef struct {                         /* XLA_FFI_Api, up to XLA_FFI_Stream_Get */
    size_t struct_size;
    lpx_ext *extension_start;
    lpx_version api_version;
    const void *internal_api;
    lpx_error *(*error_create)(lpx_error_args *);
    void (*error_get_message)(void *);
    void (*error_destroy)(void *);
    void *(*handler_register)(void *);
    lpx_error *(*stream_get)(lpx_stream_args *);
} lpx_api;

typedef struct {                         /* XLA_FFI_Buffer */
    size_t struct_size;
    lpx_ext *extension_start;
    int dtype;                           /* XLA_FFI_DataType */
    void *data;
    int64_t rank;
    int64_t *dims;
} lpx_buffer;

/* XLA_FFI_DataType values of the element types lpmpi takes (and the token) */
enum { LPX_PRED = 1, LPX_S8 = 2, LPX_S16 = 3, LPX_S32 = 4, LPX_S64 = 5, LPX_U8 = 6, LPX_U16 = 7,
       LPX_U32 = 8, LPX_U64 = 9, LPX_F16 = 10, LPX_F32 = 11, LPX_F64 = 12, LPX_C64 = 15,
       LPX_BF16 = 16, LPX_TOKEN = 17, LPX_C128 = 18 };

typedef struct { const char *ptr; size_t len; } lpx_bytes;        /* XLA_FFI_ByteSpan */
typedef struct { int dtype; void *value; } lpx_scalar;            /* XLA_FFI_Scalar */
enum { LPX_ATTR_SCALAR = 3 };

typedef struct {                         /* XLA_FFI_Args and XLA_FFI_Rets */
    size_t struct_size;
    lpx_ext *extension_start;
    int64_t size;
    int *types;                          /* 1: buffer */
    void **items;
} lpx_list;

typedef struct {                         /* XLA_FFI_Attrs (sorted by name) */
    size_t struct_size;
    lpx_ext *extension_start;
    int64_t size;
    int *types;
    lpx_bytes **names;
    void **attrs;
} lpx_attrs;

typedef struct {                         /* XLA_FFI_CallFrame */
    size_t struct_size;
    lpx_ext *extension_start;
    const lpx_api *api;
    void *ctx;
    int stage;                           /* 3: execute */
    lpx_list args;
    lpx_list rets;
    lpx_attrs attrs;
} lpx_frame;
enum { LPX_STAGE_EXECUTE = 3 };

typedef struct {                         /* XLA_FFI_Metadata */
    size_t struct_size;
    lpx_version api_version;
    uint32_t traits;
    int64_t state_type_id;               /* XLA_FFI_TypeId; 0: none (a stateless handler) */
} lpx_metadata;

typedef struct {                         /* XLA_FFI_Metadata_Extension */
    lpx_ext base;
    lpx_metadata *metadata;
} lpx_metadata_ext;

typedef lpx_error *lpx_handler(lpx_frame *frame);

#endif
