/* lp_status.h: how the engine's C and CUDA files report failures.
 *
 * Every function returns an int status (LP_OK or an LP_ERR_* code of lpmpi.h).  The first
 * failure records a message for the user (lp_errmsg) and, separately, where it was detected
 * (lp_errwhere: "src/alg/alg_lp.c:123", shown with LPMPI_DEBUG=1), then each caller passes the
 * code up: one check macro per kind of call, one cleanup label per function. */
#ifndef LP_STATUS_H
#define LP_STATUS_H

#include "lpmpi.h"

#ifdef __cplusplus
extern "C" {
#endif

/* record `fmt` (printf-style) as the message of this thread's last failure; returns code */
int lp_fail(int code, const char *file, int line, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
/* an MPI call `call` failed with mpierr: LP_ERR_MPI with the library's error string (a
 * truncation also says how to find the ranks that disagree) */
int lp_mpi_fail(int mpierr, const char *file, int line, const char *call);

/* make (msg, where), recorded earlier (maybe by another thread), this thread's last failure */
int lp_set_error(int code, const char *msg, const char *where);

#define LP_FAIL(code, ...) lp_fail((code), __FILE__, __LINE__, __VA_ARGS__)
/* run an int-returning lpmpi call; on failure jump to the function's cleanup label */
#define LP_TRY(expr) do { rc = (expr); if (rc != LP_OK) goto cleanup; } while (0)
/* run an MPI call; on failure record the MPI error string and jump to cleanup */
#define LP_MPI(call) do { int mpi_rc_ = (call); \
    if (mpi_rc_ != MPI_SUCCESS) { rc = lp_mpi_fail(mpi_rc_, __FILE__, __LINE__, #call); goto cleanup; } \
} while (0)

#ifdef __cplusplus
}
#endif
#endif
