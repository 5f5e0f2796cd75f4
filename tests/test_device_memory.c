/* The harness's device memory (harness/device_memory.h) on the GPU, label gpu: exit 77 without
 * one. Run twice (tests/CMakeLists.txt): from the pool, and with ATTN_DEVICE_POOL=0 (plain
 * cudaMalloc and cudaFree). In one process (no fork: CUDA does not survive one). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "device_memory.h"
#include "harness.h"
#include "unit.h"

#define ck_cuda(call) ck_assert_msg((call) == cudaSuccess, "%s: %s", #call, cudaGetErrorString(cudaGetLastError()))

static int pool_on(void) {
    const char *v = getenv("ATTN_DEVICE_POOL");
    return !(v && strcmp(v, "0") == 0);
}

static size_t free_bytes(void) {
    size_t f = 0, t = 0;
    ck_cuda(cudaMemGetInfo(&f, &t));
    return f;
}

/* written on one non-blocking stream, read on another: usable on every stream, as cudaMalloc's */
START_TEST(usable_on_every_stream) {
    const size_t n = 64u << 20;
    unsigned char *p, host[256];
    cudaStream_t a, b;
    ck_cuda(attn_dev_malloc((void **)&p, n));
    ck_cuda(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
    ck_cuda(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
    ck_cuda(cudaMemsetAsync(p, 0x5a, n, a));
    ck_cuda(cudaStreamSynchronize(a));
    ck_cuda(cudaMemcpyAsync(host, p + n - sizeof host, sizeof host, cudaMemcpyDeviceToHost, b));
    ck_cuda(cudaStreamSynchronize(b));
    for (size_t i = 0; i < sizeof host; i++) ck_assert_int_eq(host[i], 0x5a);
    ck_cuda(attn_dev_free(p));
    ck_cuda(attn_dev_free(NULL));
    cudaStreamDestroy(a), cudaStreamDestroy(b);
}
END_TEST

/* the pool keeps a freed GiB and hands it out again, until attn_dev_trim; cudaFree returns it */
START_TEST(freed_memory_kept_until_trimmed) {
    const size_t n = (size_t)1 << 30, slack = n / 10;
    void *p, *q;
    const size_t before = free_bytes();
    ck_cuda(attn_dev_malloc(&p, n));
    ck_cuda(attn_dev_free(p));
    const size_t after = free_bytes();
    if (!pool_on()) {
        ck_assert_msg(after + slack >= before, "cudaFree gave back %zd of %zu bytes", (ssize_t)(after - before), n);
        return;
    }
    ck_assert_msg(after + n - slack <= before, "the pool kept %zd of the %zu bytes freed", (ssize_t)(before - after),
                  n);
    ck_cuda(attn_dev_malloc(&q, n));
    ck_assert_ptr_eq(q, p); /* the same memory again, not a new mapping */
    ck_cuda(attn_dev_free(q));
    ck_cuda(attn_dev_trim());
    ck_assert_msg(free_bytes() + slack >= before, "attn_dev_trim gave back %zd of %zu bytes",
                  (ssize_t)(free_bytes() - after), n);
}
END_TEST

/* what the pool keeps never makes an allocation fail that cudaMalloc would make: 45 % of the free
 * memory freed into it, then 55 % asked for (more than is left beside what it keeps) */
START_TEST(grows_past_what_it_keeps) {
    const size_t f = free_bytes(), mib = (size_t)1 << 20;
    const size_t a = f / 100 * 45 / mib * mib, b = f / 100 * 55 / mib * mib;
    void *p, *q;
    ck_cuda(attn_dev_malloc(&p, a));
    ck_cuda(attn_dev_free(p));
    const cudaError_t e = attn_dev_malloc(&q, b);
    ck_assert_msg(e == cudaSuccess, "%zu MiB after %zu MiB were freed (%zu MiB free at the start): %s", b / mib,
                  a / mib, f / mib, cudaGetErrorString(e));
    ck_assert_int_eq(cudaGetLastError(), cudaSuccess); /* no error left behind by the retry */
    ck_cuda(attn_dev_free(q));
    ck_cuda(attn_dev_trim());
}
END_TEST

/* stream-ordered: allocated, used and given back on one stream without a synchronization */
START_TEST(stream_ordered) {
    cudaStream_t s;
    ck_cuda(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    unsigned *p, host = 0;
    for (int i = 0; i < 100; i++) {
        ck_cuda(attn_dev_malloc_async((void **)&p, 4096, s));
        ck_cuda(cudaMemsetAsync(p, i, sizeof *p, s));
        ck_cuda(cudaMemcpyAsync(&host, p, sizeof host, cudaMemcpyDeviceToHost, s));
        ck_cuda(cudaFreeAsync(p, s));
    }
    ck_cuda(cudaStreamSynchronize(s));
    ck_assert_uint_eq(host, 99u * 0x01010101u);
    cudaStreamDestroy(s);
}
END_TEST

int main(void) {
    if (attn_unit_no_gpu()) return ATTN_EXIT_SKIP;
    printf("device memory from %s\n", pool_on() ? "the harness's pool" : "cudaMalloc (ATTN_DEVICE_POOL=0)");
    Suite *su = suite_create("device_memory");
    TCase *tc = tcase_create("device_memory");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, usable_on_every_stream);
    tcase_add_test(tc, freed_memory_kept_until_trimmed);
    tcase_add_test(tc, grows_past_what_it_keeps);
    tcase_add_test(tc, stream_ordered);
    suite_add_tcase(su, tc);
    return attn_unit_run_in_process(su);
}
