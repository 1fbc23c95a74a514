#include "CBenchmarkSupport.h"

#include <errno.h>
#include <pthread.h>

size_t bench_mutex_size(void) { return sizeof(pthread_mutex_t); }

int bench_robust_mutex_init(void *memory) {
#if defined(__linux__)
    pthread_mutexattr_t attributes;
    int result = pthread_mutexattr_init(&attributes);
    if (result != 0) return result;
    result = pthread_mutexattr_setpshared(&attributes, PTHREAD_PROCESS_SHARED);
    if (result == 0) result = pthread_mutexattr_setrobust(&attributes, PTHREAD_MUTEX_ROBUST);
    if (result == 0) result = pthread_mutex_init((pthread_mutex_t *)memory, &attributes);
    pthread_mutexattr_destroy(&attributes);
    return result;
#else
    (void)memory;
    return ENOTSUP;
#endif
}
