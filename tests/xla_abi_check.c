/* lpmpi's declarations of XLA's FFI ABI (src/ffi/xla_ffi_abi.h) against the installed jaxlib's own
 * header (xla/ffi/api/c_api.h): compiled by tests/test_jax.py where JAX is installed; a layout
 * that differs fails to compile. */
#include <stddef.h>
#include "xla/ffi/api/c_api.h"
#include "xla_ffi_abi.h"

#define SAME(a, fa, b, fb) \
    _Static_assert(offsetof(a, fa) == offsetof(b, fb) && sizeof(((a *)0)->fa) == sizeof(((b *)0)->fb), \
                   #a "." #fa " differs from " #b "." #fb)

SAME(lpx_ext, struct_size, XLA_FFI_Extension_Base, struct_size);
SAME(lpx_ext, type, XLA_FFI_Extension_Base, type);
SAME(lpx_ext, next, XLA_FFI_Extension_Base, next);
SAME(lpx_version, major_version, XLA_FFI_Api_Version, major_version);
SAME(lpx_version, minor_version, XLA_FFI_Api_Version, minor_version);
SAME(lpx_error_args, message, XLA_FFI_Error_Create_Args, message);
SAME(lpx_error_args, errc, XLA_FFI_Error_Create_Args, errc);
SAME(lpx_stream_args, ctx, XLA_FFI_Stream_Get_Args, ctx);
SAME(lpx_stream_args, stream, XLA_FFI_Stream_Get_Args, stream);
SAME(lpx_api, api_version, XLA_FFI_Api, api_version);
SAME(lpx_api, error_create, XLA_FFI_Api, XLA_FFI_Error_Create);
SAME(lpx_api, stream_get, XLA_FFI_Api, XLA_FFI_Stream_Get);
SAME(lpx_buffer, dtype, XLA_FFI_Buffer, dtype);
SAME(lpx_buffer, data, XLA_FFI_Buffer, data);
SAME(lpx_buffer, rank, XLA_FFI_Buffer, rank);
SAME(lpx_buffer, dims, XLA_FFI_Buffer, dims);
SAME(lpx_list, size, XLA_FFI_Args, size);
SAME(lpx_list, types, XLA_FFI_Args, types);
SAME(lpx_list, items, XLA_FFI_Args, args);
SAME(lpx_list, items, XLA_FFI_Rets, rets);
SAME(lpx_attrs, size, XLA_FFI_Attrs, size);
SAME(lpx_attrs, types, XLA_FFI_Attrs, types);
SAME(lpx_attrs, names, XLA_FFI_Attrs, names);
SAME(lpx_attrs, attrs, XLA_FFI_Attrs, attrs);
SAME(lpx_bytes, len, XLA_FFI_ByteSpan, len);
SAME(lpx_scalar, value, XLA_FFI_Scalar, value);
SAME(lpx_frame, api, XLA_FFI_CallFrame, api);
SAME(lpx_frame, ctx, XLA_FFI_CallFrame, ctx);
SAME(lpx_frame, stage, XLA_FFI_CallFrame, stage);
SAME(lpx_frame, args, XLA_FFI_CallFrame, args);
SAME(lpx_frame, rets, XLA_FFI_CallFrame, rets);
SAME(lpx_frame, attrs, XLA_FFI_CallFrame, attrs);
SAME(lpx_metadata, api_version, XLA_FFI_Metadata, api_version);
SAME(lpx_metadata, traits, XLA_FFI_Metadata, traits);
SAME(lpx_metadata, state_type_id, XLA_FFI_Metadata, state_type_id);
SAME(lpx_metadata_ext, metadata, XLA_FFI_Metadata_Extension, metadata);
_Static_assert(LPX_PRED == XLA_FFI_DataType_PRED && LPX_S8 == XLA_FFI_DataType_S8 &&
               LPX_S16 == XLA_FFI_DataType_S16 && LPX_S32 == XLA_FFI_DataType_S32 &&
               LPX_S64 == XLA_FFI_DataType_S64 && LPX_U8 == XLA_FFI_DataType_U8 &&
               LPX_U16 == XLA_FFI_DataType_U16 && LPX_U32 == XLA_FFI_DataType_U32 &&
               LPX_U64 == XLA_FFI_DataType_U64 && LPX_F16 == XLA_FFI_DataType_F16 &&
               LPX_F32 == XLA_FFI_DataType_F32 && LPX_F64 == XLA_FFI_DataType_F64 &&
               LPX_C64 == XLA_FFI_DataType_C64 && LPX_BF16 == XLA_FFI_DataType_BF16 &&
               LPX_TOKEN == XLA_FFI_DataType_TOKEN && LPX_C128 == XLA_FFI_DataType_C128,
               "element type codes differ");
_Static_assert(LPX_EXT_METADATA == XLA_FFI_Extension_Metadata && LPX_ATTR_SCALAR ==
               XLA_FFI_AttrType_SCALAR && LPX_STAGE_EXECUTE == XLA_FFI_ExecutionStage_EXECUTE &&
               LPX_INVALID_ARGUMENT == XLA_FFI_Error_Code_INVALID_ARGUMENT &&
               LPX_FAILED_PRECONDITION == XLA_FFI_Error_Code_FAILED_PRECONDITION &&
               LPX_UNIMPLEMENTED == XLA_FFI_Error_Code_UNIMPLEMENTED &&
               LPX_INTERNAL == XLA_FFI_Error_Code_INTERNAL &&
               LPX_DEADLINE_EXCEEDED == XLA_FFI_Error_Code_DEADLINE_EXCEEDED &&
               LPX_RESOURCE_EXHAUSTED == XLA_FFI_Error_Code_RESOURCE_EXHAUSTED &&
               LPX_UNAVAILABLE == XLA_FFI_Error_Code_UNAVAILABLE,
               "enum values differ");
_Static_assert(LPX_API_MAJOR == XLA_FFI_API_MAJOR && LPX_API_MINOR <= XLA_FFI_API_MINOR,
               "FFI version newer than this jaxlib's");
