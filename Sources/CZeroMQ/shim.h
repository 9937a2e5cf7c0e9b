#include <zmq.h>

// ETERM and the other libzmq-private errno values are macros built from ZMQ_HAUSNUMERO arithmetic, which Swift does
// not import; expose them as constants so the wrapper can recognise them.
static const int CZMQ_ETERM = ETERM;
static const int CZMQ_EFSM = EFSM;
static const int CZMQ_ENOCOMPATPROTO = ENOCOMPATPROTO;
static const int CZMQ_EMTHREAD = EMTHREAD;
