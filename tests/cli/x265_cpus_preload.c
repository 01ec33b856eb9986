/* Preloaded (LD_PRELOAD) by test_encoder_threads_cli: libx265, and only libx265, counts
 * LONGVK_TEST_X265_CPUS CPUs. x265 sizes its frame threads and worker pool by the CPUs it
 * counts (libnuma's nodes, or sysconf without NUMA), not by the process's affinity, so
 * `taskset` alone shows nothing; this makes a 16-CPU machine of a small one. Not a test
 * itself (tests/CMakeLists.txt builds it as a shared library). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *fake_cpus(const void *caller) {
    const char *n = getenv("LONGVK_TEST_X265_CPUS");
    Dl_info info;
    if (!n || !dladdr(caller, &info) || !info.dli_fname || !strstr(info.dli_fname, "libx265")) return NULL;
    return n;
}

long sysconf(int name) {
    static long (*real)(int);
    if (!real) real = (long (*)(int))dlsym(RTLD_NEXT, "sysconf");
    const char *n = fake_cpus(__builtin_return_address(0));
    if (n && (name == _SC_NPROCESSORS_ONLN || name == _SC_NPROCESSORS_CONF)) return atol(n);
    return real ? real(name) : -1;
}

/* without NUMA x265 counts the CPUs by sysconf */
int numa_available(void) {
    static int (*real)(void);
    if (fake_cpus(__builtin_return_address(0))) return -1;
    if (!real) real = (int (*)(void))dlsym(RTLD_NEXT, "numa_available");
    return real ? real() : -1;
}
