/* config.c: the engine's knobs, set by the bindings from the environment at import
 * (lpmpi/_env.py: LPMPI_WINDOW, LPMPI_MAX_MSG_BYTES, LPMPI_CHECK). */
#include "engine.h"

int lp_window = LP_WINDOW_DEFAULT;          /* chunks in flight per direction */
size_t lp_max_msg_bytes = LP_KNOB_MAX_MSG_BYTES_DEFAULT;  /* largest single MPI message */
int lp_check_enabled;                       /* LPMPI_CHECK: agree on every call first */
int lp_node_transport = LP_NTM_AUTO;        /* LPMPI_NODE_TRANSPORT: LP_NTM_* */
long long lp_timeout_ns;                    /* LPMPI_TIMEOUT: the watchdog (sched/wait.c); 0 off */
/* the generation of everything "auto" reads (model, table rows, overrides: engine.h); starts at
 * 1 so that zeroed cache entries never match */
unsigned long lp_select_gen = 1;

long long lp_set_timeout_ns(long long ns) {
    long long prev = lp_timeout_ns;
    lp_timeout_ns = ns > 0 ? ns : 0;
    return prev;
}

void lp_set_node_transport(int mode) {
    lp_node_transport = mode >= LP_NTM_MPI && mode <= LP_NTM_CMA ? mode : LP_NTM_AUTO;
}

void lp_configure(size_t max_msg_bytes, int window, int check) {
    if (max_msg_bytes) lp_max_msg_bytes = max_msg_bytes;
    if (window > 0) lp_window = window > LP_WINDOW_MAX ? LP_WINDOW_MAX : window;
    lp_check_enabled = check;
}

int lp_window_get(void) { return lp_window; }
