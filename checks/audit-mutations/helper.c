/* Fixture host library bundled next to the extension (like auditwheel's `<pkg>.libs/`).
 * It calls pthread_create so that it needs a recent GLIBC_ version (2.34 on glibc >= 2.34),
 * which the "platform tag too old" damage relies on. */
#include <pthread.h>

static void *noop(void *arg) { return arg; }

int kfix_helper_threads(void) {
    pthread_t t;
    if (pthread_create(&t, 0, noop, 0) != 0) return -1;
    return pthread_join(t, 0);
}
