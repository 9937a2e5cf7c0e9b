// zeromq-c-baseline: PUSH->PULL throughput over tcp loopback, calling libzmq directly.
//
//   zeromq-c-baseline SIZE COUNT [curve] [REPETITIONS]
//
// Runs the measurement REPETITIONS times (default 1) in this process, each with a fresh context, and prints one line
// per run: "size=SIZE curve=0|1 count=COUNT seconds=S msgs_per_sec=M mb_per_sec=B".
// The zeromq-benchmark executable runs this next to the Swift wrapper doing exactly the same: one context with one
// I/O thread, PULL bound on tcp://127.0.0.1:*, PUSH connected from a second thread sending COUNT messages of SIZE
// bytes with zmq_send (one copy into the message), the receiver timing from the first message to the last with
// zmq_msg_recv (no copy). Default high-water marks; CURVE without a ZAP handler (only the handshake would differ).
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

struct sender_args {
    void *context;
    char endpoint[256];
    size_t size;
    long count;
    int curve;
    char server_public[41];
};

static void check(int rc, const char *what) {
    if (rc == -1) {
        fprintf(stderr, "zeromq-c-baseline: %s: %s\n", what, zmq_strerror(zmq_errno()));
        exit(1);
    }
}

static void *send_all(void *raw) {
    struct sender_args *args = raw;
    void *push = zmq_socket(args->context, ZMQ_PUSH);
    if (args->curve) {
        char public_key[41], secret_key[41];
        check(zmq_curve_keypair(public_key, secret_key), "curve keypair");
        check(zmq_setsockopt(push, ZMQ_CURVE_PUBLICKEY, public_key, 40), "client public key");
        check(zmq_setsockopt(push, ZMQ_CURVE_SECRETKEY, secret_key, 40), "client secret key");
        check(zmq_setsockopt(push, ZMQ_CURVE_SERVERKEY, args->server_public, 40), "server key");
    }
    check(zmq_connect(push, args->endpoint), "connect");
    char *buffer = malloc(args->size);
    memset(buffer, 0x42, args->size);
    for (long i = 0; i < args->count; i++) {
        int rc;
        do {
            rc = zmq_send(push, buffer, args->size, 0);
        } while (rc == -1 && zmq_errno() == EINTR);
        check(rc, "send");
    }
    free(buffer);
    zmq_close(push);  // default linger: everything is delivered before the context terminates
    return NULL;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void measure(size_t size, long count, int curve) {
    struct sender_args args = {0};
    args.size = size;
    args.count = count;
    args.curve = curve;
    args.context = zmq_ctx_new();

    void *pull = zmq_socket(args.context, ZMQ_PULL);
    if (args.curve) {
        char secret_key[41];
        check(zmq_curve_keypair(args.server_public, secret_key), "curve keypair");
        int one = 1;
        check(zmq_setsockopt(pull, ZMQ_CURVE_SERVER, &one, sizeof one), "curve server");
        check(zmq_setsockopt(pull, ZMQ_CURVE_SECRETKEY, secret_key, 40), "server secret key");
    }
    check(zmq_bind(pull, "tcp://127.0.0.1:*"), "bind");
    size_t length = sizeof args.endpoint;
    check(zmq_getsockopt(pull, ZMQ_LAST_ENDPOINT, args.endpoint, &length), "last endpoint");

    pthread_t sender;
    pthread_create(&sender, NULL, send_all, &args);

    zmq_msg_t message;
    zmq_msg_init(&message);
    double start = 0;
    for (long i = 0; i < args.count; i++) {
        int rc;
        do {
            rc = zmq_msg_recv(&message, pull, 0);
        } while (rc == -1 && zmq_errno() == EINTR);
        check(rc, "receive");
        if ((size_t)rc != args.size) {
            fprintf(stderr, "zeromq-c-baseline: got %d bytes, expected %zu\n", rc, args.size);
            exit(1);
        }
        if (i == 0) start = now();
    }
    double seconds = now() - start;
    zmq_msg_close(&message);
    pthread_join(sender, NULL);
    zmq_close(pull);
    zmq_ctx_term(args.context);

    // The clock starts at the first message, so COUNT - 1 messages are timed (as libzmq's local_thr does).
    double messages = (double)(args.count - 1);
    printf("size=%zu curve=%d count=%ld seconds=%.6f msgs_per_sec=%.0f mb_per_sec=%.1f\n", args.size, args.curve,
           args.count, seconds, messages / seconds, messages * args.size / seconds / 1e6);
    fflush(stdout);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: zeromq-c-baseline SIZE COUNT [curve] [REPETITIONS]\n");
        return 64;
    }
    size_t size = (size_t)atol(argv[1]);
    long count = atol(argv[2]);
    int curve = argc > 3 && strcmp(argv[3], "curve") == 0;
    long repetitions = argc > 4 ? atol(argv[4]) : 1;
    if (count < 2 || repetitions < 1) {
        fprintf(stderr, "zeromq-c-baseline: COUNT must be at least 2 and REPETITIONS at least 1\n");
        return 64;
    }
    for (long i = 0; i < repetitions; i++) measure(size, count, curve);
    return 0;
}
