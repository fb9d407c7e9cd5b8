// oneCCL's allgather and reduce_scatter (and allreduce) at P ranks, float32 sum, timed like
// lpmpi-bench: per size, warm-up calls, then repetitions for at least min_time seconds; each rank
// times its calls, the figure is the slowest rank's median (MPI_Allreduce MAX of medians).
// Sizes are the P blocks' bytes (nccl-tests), as lpmpi-bench --collective allgather prints them.
// Build and run: see run.sh beside this file.  Results are checked against the exact sums.
#include <mpi.h>
#include <oneapi/ccl.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

static double now() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int main(int argc, char **argv) {
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);   // what oneCCL asks of an external MPI
    int P, r;
    MPI_Comm_size(MPI_COMM_WORLD, &P);
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    ccl::init();
    ccl::shared_ptr_class<ccl::kvs> kvs;
    ccl::kvs::address_type addr;
    if (r == 0) {
        kvs = ccl::create_main_kvs();
        addr = kvs->get_address();
    }
    MPI_Bcast(addr.data(), (int)addr.size(), MPI_BYTE, 0, MPI_COMM_WORLD);
    if (r != 0) kvs = ccl::create_kvs(addr);
    auto comm = ccl::create_communicator(P, r, kvs);
    const double min_time = argc > 2 ? atof(argv[2]) : 0.3;
    std::vector<size_t> sizes;
    for (char *s = strtok(argv[1], ","); s; s = strtok(nullptr, ",")) sizes.push_back(strtoull(s, nullptr, 10));
    if (r == 0) printf("# oneCCL %s, P = %d, float32 sum; time: the slowest rank's median (us)\n",
                       ccl::get_library_version().full, P);
    std::string only = argc > 3 ? argv[3] : "allgather,reduce_scatter,allreduce";
    for (const char *coll : {"allgather", "reduce_scatter", "allreduce"}) {
        if (only.find(coll) == std::string::npos) continue;
        for (size_t nbytes : sizes) {
            std::string c = coll;
            size_t total = nbytes / 4, blk = total / P;    // elements: P blocks, one block
            std::vector<float> in(c == "allgather" ? blk : total), out(c == "reduce_scatter" ? blk : total);
            for (size_t i = 0; i < in.size(); i++) in[i] = (float)(r + 1) + (float)(i % 7);
            auto call = [&]() {
                if (c == "allgather") ccl::allgather(in.data(), out.data(), blk, ccl::datatype::float32, comm).wait();
                else if (c == "reduce_scatter") ccl::reduce_scatter(in.data(), out.data(), blk, ccl::datatype::float32,
                                                                     ccl::reduction::sum, comm).wait();
                else ccl::allreduce(in.data(), out.data(), total, ccl::datatype::float32, ccl::reduction::sum, comm).wait();
            };
            for (int w = 0; w < 3; w++) call();
            int bad = 0;                                   // check the result once
            for (size_t i = 0; i < out.size(); i++) {
                double want;
                if (c == "allgather") want = (double)(i / blk + 1) + (double)((i % blk) % 7);
                else {
                    size_t g = c == "reduce_scatter" ? (size_t)r * blk + i : i;
                    want = P * (P + 1) / 2.0 + P * (double)(g % 7);
                }
                if (out[i] != (float)want) { bad++; break; }
            }
            std::vector<double> t;
            double t0 = now();
            do {
                MPI_Barrier(MPI_COMM_WORLD);
                double a = now();
                call();
                t.push_back(now() - a);
            } while (now() - t0 < min_time || t.size() < 5);
            std::sort(t.begin(), t.end());
            double med = t[t.size() / 2] * 1e6, worst = 0;
            int anybad = 0;
            MPI_Allreduce(&med, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
            MPI_Allreduce(&bad, &anybad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
            if (r == 0) printf("%-15s %10zu %12.2f  %s\n", coll, nbytes, worst, anybad ? "WRONG" : "ok");
        }
    }
    MPI_Finalize();
    return 0;
}
