/* Point-to-point helpers: whole-buffer transfers split into pieces of at most
 * lp_max_msg_bytes, so that every MPI count stays in int range whatever the byte size.
 * All pieces of one transfer use one tag; MPI's non-overtaking rule keeps them in order. */
#include "internal.h"

static size_t npieces(size_t bytes) { return (bytes + lp_max_msg_bytes - 1) / lp_max_msg_bytes; }
static int piece_len(size_t bytes, size_t i) {
    size_t off = i * lp_max_msg_bytes, rest = bytes - off;
    return (int)(rest < lp_max_msg_bytes ? rest : lp_max_msg_bytes);
}

int lp_send(const lp_args_t *a, const void *b, size_t bytes, int dst, int tag) {
    int rc = LP_OK;
    size_t n = npieces(bytes);
    for (size_t i = 0; i < n; i++)
        LP_MPI(MPI_Send((const char *)b + i * lp_max_msg_bytes, piece_len(bytes, i), MPI_BYTE,
                        dst, tag, a->comm));
cleanup:
    return rc;
}

int lp_recv(const lp_args_t *a, void *b, size_t bytes, int src, int tag) {
    int rc = LP_OK;
    size_t n = npieces(bytes);
    for (size_t i = 0; i < n; i++)
        LP_MPI(MPI_Recv((char *)b + i * lp_max_msg_bytes, piece_len(bytes, i), MPI_BYTE, src, tag,
                        a->comm, MPI_STATUS_IGNORE));
cleanup:
    return rc;
}

/* Piece i of the send and piece i of the receive travel in the i-th MPI_Sendrecv; a side with
 * fewer pieces uses MPI_PROC_NULL.  Every rank loops max(its sends, its receives) times, which
 * is enough for each peer's pieces, so ring and pairwise patterns cannot deadlock. */
int lp_sendrecv(const lp_args_t *a, const void *sb, size_t sbytes, int dst,
                void *rb, size_t rbytes, int src, int tag) {
    int rc = LP_OK;
    size_t ns = npieces(sbytes), nr = npieces(rbytes), n = ns > nr ? ns : nr;
    for (size_t i = 0; i < n; i++) {
        int sl = i < ns ? piece_len(sbytes, i) : 0, rl = i < nr ? piece_len(rbytes, i) : 0;
        LP_MPI(MPI_Sendrecv((const char *)sb + (i < ns ? i * lp_max_msg_bytes : 0), sl, MPI_BYTE,
                            i < ns ? dst : MPI_PROC_NULL, tag,
                            (char *)rb + (i < nr ? i * lp_max_msg_bytes : 0), rl, MPI_BYTE,
                            i < nr ? src : MPI_PROC_NULL, tag, a->comm, MPI_STATUS_IGNORE));
    }
cleanup:
    return rc;
}
