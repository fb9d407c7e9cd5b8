/* error.c: the message and place of this thread's last failure (lp_status.h). */
#include "lp_status.h"
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char errbuf[1024];
static _Thread_local char wherebuf[160];

const char *lp_errmsg(void) { return errbuf; }
const char *lp_errwhere(void) { return wherebuf; }

int lp_fail(int code, const char *file, int line, const char *fmt, ...) {
    va_list ap;
    const char *src = strstr(file, "src/");
    snprintf(wherebuf, sizeof wherebuf, "%s:%d", src ? src : file, line);
    va_start(ap, fmt);
    vsnprintf(errbuf, sizeof errbuf, fmt, ap);
    va_end(ap);
    return code;
}

int lp_mpi_fail(int mpierr, const char *file, int line, const char *call) {
    char s[MPI_MAX_ERROR_STRING];
    int len = 0, cls = MPI_ERR_OTHER;
    const char *name = call, *paren = strchr(call, '(');
    if (MPI_Error_string(mpierr, s, &len) != MPI_SUCCESS) snprintf(s, sizeof s, "MPI error %d", mpierr);
    MPI_Error_class(mpierr, &cls);
    int n = paren ? (int)(paren - call) : (int)strlen(call);
    if (cls == MPI_ERR_TRUNCATE)
        return lp_fail(LP_ERR_MPI, file, line,
                       "%.*s failed: %s (a message was longer than its receive: the ranks probably "
                       "called this collective with different counts, dtypes, algorithms or chunk "
                       "sizes; rerun with LPMPI_CHECK=1 to find which)", n, name, s);
    return lp_fail(LP_ERR_MPI, file, line, "%.*s failed: %s", n, name, s);
}

int lp_set_error(int code, const char *msg, const char *where) {
    snprintf(errbuf, sizeof errbuf, "%s", msg);
    snprintf(wherebuf, sizeof wherebuf, "%s", where);
    return code;
}
