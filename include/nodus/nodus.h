/*
 * nodus — topology-aware collective communication.
 *
 * The public C API. NCCL-shaped: a communicator is created collectively by
 * `nranks` ranks, then every rank calls the same collectives in the same order.
 *
 * Conventions
 *  - Every function returns a nodusResult_t. On failure the communicator (when
 *    there is one) remembers a human-readable explanation that
 *    nodusGetLastError() returns; nodusGetErrorString() names the code.
 *  - Counts are in elements of the given data type, never bytes.
 *  - In-place operation follows NCCL:
 *      AllReduce, Broadcast, Reduce:  sendbuf == recvbuf
 *      AllGather:      sendbuf == recvbuf + rank * count * sizeof(type)
 *      ReduceScatter:  sendbuf + rank * recvcount * sizeof(type) == recvbuf
 *    Buffers that overlap in any other way are rejected (nodusInvalidArgument).
 *  - Blocking calls return when this rank's part is complete and its output
 *    buffer holds the result. The non-blocking forms (nodusI*) return at once
 *    with a request; outstanding requests of one communicator complete in the
 *    order they were issued and progress in the background (the caller does not
 *    have to poll). Buffers must not be touched until the request completes.
 *  - A communicator is not meant to be called from several threads at once;
 *    nodusCommAbort() is the exception and may be called from any thread.
 */
#ifndef NODUS_NODUS_H
#define NODUS_NODUS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NODUS_MAJOR 0
#define NODUS_MINOR 1
#define NODUS_PATCH 0
/* Encoded as MAJOR*10000 + MINOR*100 + PATCH. */
#define NODUS_VERSION_CODE (NODUS_MAJOR * 10000 + NODUS_MINOR * 100 + NODUS_PATCH)

typedef enum {
  nodusSuccess = 0,
  nodusInvalidArgument = 1, /* a bad pointer, count, type, op, rank or root */
  nodusInvalidUsage = 2,    /* a call that is wrong in this state (after destroy, mismatched id, ...) */
  nodusSystemError = 3,     /* the operating system refused (memory, sockets, shared memory) */
  nodusInternalError = 4,   /* a bug in nodus: please report it */
  nodusRemoteError = 5,     /* a peer failed, died or aborted */
  nodusTimeout = 6,         /* a wait exceeded NODUS_TIMEOUT_MS */
  nodusAborted = 7,         /* nodusCommAbort() was called */
  nodusInProgress = 8,      /* nodusWaitTimeout(): the request has not completed yet */
  nodusNumResults = 9,
  /* Not results: they make the enum span every int, so any value a C caller
   * passes is one C++ may hold (and nodus can reject). */
  nodusResultEnumMin_ = -0x7fffffff - 1,
  nodusResultEnumMax_ = 0x7fffffff
} nodusResult_t;

typedef enum {
  nodusInt8 = 0,
  nodusUint8 = 1,
  nodusInt32 = 2,
  nodusUint32 = 3,
  nodusInt64 = 4,
  nodusUint64 = 5,
  nodusFloat16 = 6,
  nodusBfloat16 = 7,
  nodusFloat32 = 8,
  nodusFloat64 = 9,
  nodusNumTypes = 10,
  nodusDataTypeEnumMin_ = -0x7fffffff - 1, /* not types: see nodusResultEnumMin_ */
  nodusDataTypeEnumMax_ = 0x7fffffff
} nodusDataType_t;

/* fp16 and bf16 are reduced in fp32 and rounded once per reduction. nodusAvg
 * divides the sum by the number of ranks (integer types: truncating division). */
typedef enum {
  nodusSum = 0,
  nodusProd = 1,
  nodusMin = 2,
  nodusMax = 3,
  nodusAvg = 4,
  nodusNumOps = 5,
  nodusRedOpEnumMin_ = -0x7fffffff - 1, /* not ops: see nodusResultEnumMin_ */
  nodusRedOpEnumMax_ = 0x7fffffff
} nodusRedOp_t;

#define NODUS_UNIQUE_ID_BYTES 128
/* Made by one process (nodusGetUniqueId) and handed to every rank by any
 * means (MPI_Bcast, a file, a key-value store). Holds the bootstrap root's
 * address and a random 128-bit secret that every connection must present. */
typedef struct {
  char internal[NODUS_UNIQUE_ID_BYTES];
} nodusUniqueId;

typedef struct nodusComm* nodusComm_t;
typedef struct nodusRequest* nodusRequest_t;

/* ---- Library -------------------------------------------------------------- */

/* Writes NODUS_VERSION_CODE of the library actually loaded. */
nodusResult_t nodusGetVersion(int* version);

/* A short, static description of a result code. Never NULL. */
const char* nodusGetErrorString(nodusResult_t result);

/* The explanation of the last failure on `comm` ("" if none). With comm == NULL,
 * the last failure of a call made by this thread without a communicator (for
 * example a failed nodusCommInitRank). The string stays valid until the next
 * failing call on the same communicator / thread. Never NULL. */
const char* nodusGetLastError(nodusComm_t comm);

/* The value nodus takes for an integer NODUS_* parameter (its registered
 * name, e.g. "NODUS_TIMEOUT_MS") from the environment as it is now: the
 * default where unset. A value out of the parameter's range, or not a number,
 * fails with nodusInvalidArgument and a message naming the range
 * (nodusGetLastError(NULL)). nodus-info lists every parameter. */
nodusResult_t nodusParamGetInt(const char* name, int64_t* value);

/* ---- Communicators -------------------------------------------------------- */

/* Creates a unique id and starts the bootstrap root in this process. Call it
 * once per communicator, in one process, and distribute the id. The root
 * listens until every rank has joined (or NODUS_TIMEOUT_MS passes). */
nodusResult_t nodusGetUniqueId(nodusUniqueId* uniqueId);

/* Collective over `nranks` callers that pass the same id; each passes its own
 * `rank` in [0, nranks). Blocks until all ranks have joined. */
nodusResult_t nodusCommInitRank(nodusComm_t* comm, int nranks, nodusUniqueId uniqueId, int rank);

/* Creates `ndev` communicators whose ranks are threads of this process
 * (loopback transport). comms[i] is rank i. Use each from its own thread. */
nodusResult_t nodusCommInitAll(nodusComm_t* comms, int ndev);

/* ---- Per-communicator settings -------------------------------------------- */

/* Settings of one communicator, as NCCL's ncclConfig_t: start from
 * NODUS_CONFIG_INITIALIZER and change the fields you want; a field left at its
 * initializer value takes the environment's setting (the NODUS_* variable
 * named beside it). The first three fields let the struct grow: a program
 * built against an older, shorter nodusConfig_t keeps working.
 *
 *   nodusConfig_t cfg = NODUS_CONFIG_INITIALIZER;
 *   cfg.timeoutMs = 5000;
 *   cfg.algo = "allreduce:ring";
 *   nodusCommInitRankConfig(&comm, nranks, id, rank, &cfg);
 *
 * Values are checked as the environment's are: a timeout out of range or
 * rules that do not parse fail the init with nodusInvalidArgument and a
 * message naming the field, the value and the range. Every rank must give
 * the same algorithm rules (checked at init, as NODUS_ALGO is). */
#define NODUS_CONFIG_UNDEF_INT (-2147483647 - 1)
#define NODUS_CONFIG_MAGIC 0x4e434647u /* "NCFG" */
typedef struct {
  size_t size;          /* sizeof(nodusConfig_t) as the caller was compiled */
  unsigned int magic;   /* NODUS_CONFIG_MAGIC */
  unsigned int version; /* NODUS_VERSION_CODE the caller was compiled against */
  int timeoutMs;        /* NODUS_TIMEOUT_MS: longest wait without progress, 1 ms or more */
  const char* algo;     /* NODUS_ALGO: the algorithm rules; NULL: the environment's; "": none forced */
  const char* traceDir; /* NODUS_TRACE: where timelines go; NULL: the environment's */
} nodusConfig_t;
#define NODUS_CONFIG_INITIALIZER \
  { sizeof(nodusConfig_t), NODUS_CONFIG_MAGIC, NODUS_VERSION_CODE, NODUS_CONFIG_UNDEF_INT, NULL, NULL }

/* nodusCommInitRank with settings of its own; config == NULL is the same as
 * nodusCommInitRank (the environment's settings). The config is read during
 * the call only. */
nodusResult_t nodusCommInitRankConfig(nodusComm_t* comm, int nranks, nodusUniqueId uniqueId, int rank,
                                      const nodusConfig_t* config);
/* nodusCommInitAll with one config for every communicator it makes. */
nodusResult_t nodusCommInitAllConfig(nodusComm_t* comms, int ndev, const nodusConfig_t* config);
/* nodusCommInitMPIConfig, for MPI programs, is in nodus/nodus_mpi.h. */

/* ---- Communicators from communicators ------------------------------------ */
/* Neither needs a unique id: the new communicator's bootstrap runs over what
 * its parent already has. It inherits the parent's placement (hosts, NUMA
 * nodes) and fabric, and its tuner prices its own layout (a split inside one
 * host uses shared memory; a split along one torus dimension is that
 * dimension's ring). It is independent of its parent afterwards: either may be
 * destroyed or aborted first, and both may run at once from different
 * threads. config == NULL inherits the parent's settings; otherwise the
 * fields `config` sets replace the parent's and the others are inherited. */
#define NODUS_SPLIT_NOCOLOR (-1)
/* Collective over every rank of `comm` (as ncclCommSplit): the ranks passing
 * one colour make one communicator, ordered by key and then by rank in
 * `comm`. A rank passing NODUS_SPLIT_NOCOLOR gets *newcomm == NULL. Any other
 * negative colour, or a config that is refused, fails the call on every rank
 * with nodusInvalidArgument and a message naming the rank. */
nodusResult_t nodusCommSplit(nodusComm_t comm, int color, int key, nodusComm_t* newcomm,
                             const nodusConfig_t* config);
/* Collective over the `nranks` ranks of `comm` that `ranks` lists, and
 * called by those only (as MPI_Comm_create_group): new rank i is ranks[i].
 * Every member passes the same list; a list with duplicates, a rank outside
 * [0, size of comm) or without the caller fails with nodusInvalidArgument at
 * once, and members passing different lists fail within the timeout. Groups
 * of the same list are told apart by the order the members make them in. */
nodusResult_t nodusCommCreateGroup(nodusComm_t comm, const int* ranks, int nranks, nodusComm_t* newcomm,
                                   const nodusConfig_t* config);

/* Hybrid parallelism (data x tensor x pipeline, as Megatron-LM groups
 * ranks) from one communicator of dp * tp * pp ranks: *dpComm, *tpComm and
 * *ppComm are this rank's data-, tensor- and pipeline-parallel groups, and
 * coords (3 ints, may be NULL) its (dp, tp, pp) coordinates. `order` names
 * the axes from the fastest-varying, Megatron's convention: "tp-pp-dp" puts
 * ranks 0..tp-1 in one tensor group, rank = tp + TP*(pp + PP*dp). NULL: nodus
 * chooses the order that puts tensor groups on the fastest links the
 * topology knows (one host, then torus neighbours), then pipeline groups,
 * then data groups; *chosenOrder (may be NULL) receives the order used, a
 * static string. Collective over `comm` (three nodusCommSplit calls, every
 * rank alike); the groups share its placement and fabric. */
nodusResult_t nodusCommSplitGrid(nodusComm_t comm, int dp, int tp, int pp, const char* order,
                                 nodusComm_t* dpComm, nodusComm_t* tpComm, nodusComm_t* ppComm,
                                 int* coords, const char** chosenOrder);
/* The order nodusCommSplitGrid would choose for `order` NULL (local). */
nodusResult_t nodusGridOrder(nodusComm_t comm, int dp, int tp, int pp, const char** order);

/* Waits for this rank's outstanding requests, then frees the communicator.
 * Local: it does not synchronise with the other ranks. NULL is accepted. */
nodusResult_t nodusCommDestroy(nodusComm_t comm);

/* Stops every operation of `comm` that is running or queued: they return
 * nodusAborted, and peers blocked on this rank get nodusRemoteError. Safe from
 * any thread. The communicator must still be destroyed afterwards. */
nodusResult_t nodusCommAbort(nodusComm_t comm);

nodusResult_t nodusCommCount(nodusComm_t comm, int* count);
nodusResult_t nodusCommUserRank(nodusComm_t comm, int* rank);

/* ---- Collectives (blocking) ---------------------------------------------- */

nodusResult_t nodusAllReduce(const void* sendbuf, void* recvbuf, size_t count,
                             nodusDataType_t datatype, nodusRedOp_t op, nodusComm_t comm);
/* recvbuf holds nranks * sendcount elements, rank i's contribution at i*sendcount. */
nodusResult_t nodusAllGather(const void* sendbuf, void* recvbuf, size_t sendcount,
                             nodusDataType_t datatype, nodusComm_t comm);
/* AllGather into separate buffers: rank i's sendcount elements land in
 * recvbufs[i] (an array of nranks pointers, copied by the call; the buffers
 * need not be adjacent but must not overlap). In place when
 * sendbuf == recvbufs[rank]. What torch.distributed.all_gather(list) needs:
 * no staging buffer and no copy out of it. */
nodusResult_t nodusAllGatherList(const void* sendbuf, void* const* recvbufs, size_t sendcount,
                                 nodusDataType_t datatype, nodusComm_t comm);
/* sendbuf holds nranks * recvcount elements; rank i receives block i reduced. */
nodusResult_t nodusReduceScatter(const void* sendbuf, void* recvbuf, size_t recvcount,
                                 nodusDataType_t datatype, nodusRedOp_t op, nodusComm_t comm);
/* sendbuf is read on the root only; recvbuf is written on every rank. */
nodusResult_t nodusBroadcast(const void* sendbuf, void* recvbuf, size_t count,
                             nodusDataType_t datatype, int root, nodusComm_t comm);
/* recvbuf is written on the root only (may be NULL elsewhere). */
nodusResult_t nodusReduce(const void* sendbuf, void* recvbuf, size_t count,
                          nodusDataType_t datatype, nodusRedOp_t op, int root, nodusComm_t comm);
nodusResult_t nodusBarrier(nodusComm_t comm);

/* ---- AllToAll, Gather, Scatter and the V-collectives ---------------------- *
 * Counts and displacements are in elements of `datatype`; count arrays hold
 * nranks entries. A block of zero elements still goes to its peer as an empty
 * message, so a rank that expected data from it fails with nodusInvalidUsage
 * (ranks called different collectives or counts) instead of waiting. */

/* Every rank sends `count` elements to every rank, itself included: block j
 * of sendbuf (elements [j*count, (j+1)*count)) goes to rank j, and block i of
 * recvbuf comes from rank i. Both buffers hold nranks * count elements. In
 * place when sendbuf == recvbuf (MPI_IN_PLACE's Alltoall). */
nodusResult_t nodusAllToAll(const void* sendbuf, void* recvbuf, size_t count,
                            nodusDataType_t datatype, nodusComm_t comm);
/* sendcounts[j] elements at sendbuf + sdispls[j] go to rank j; the
 * recvcounts[i] elements from rank i land at recvbuf + rdispls[i].
 * sendcounts[j] on rank i must equal recvcounts[i] on rank j; receive blocks
 * must not overlap (send blocks may). In place when sendbuf == recvbuf: the
 * block for rank j goes out from where rank j's block lands (recvcounts[j] at
 * rdispls[j]), as MPI_IN_PLACE's Alltoallv: sendcounts and sdispls are then
 * ignored and may be NULL, and the counts between every two ranks must be
 * the same both ways. */
nodusResult_t nodusAllToAllV(const void* sendbuf, const size_t* sendcounts, const size_t* sdispls,
                             void* recvbuf, const size_t* recvcounts, const size_t* rdispls,
                             nodusDataType_t datatype, nodusComm_t comm);
/* Rank i's `count` elements land at recvbuf + i*count on the root. recvbuf
 * (nranks * count elements) is written on the root only and may be NULL
 * elsewhere. In place on the root when sendbuf == recvbuf + root*count. */
nodusResult_t nodusGather(const void* sendbuf, void* recvbuf, size_t count,
                          nodusDataType_t datatype, int root, nodusComm_t comm);
/* Block i of the root's sendbuf (nranks * count elements, read on the root
 * only, may be NULL elsewhere) lands in rank i's recvbuf (count elements). In
 * place on the root when recvbuf == sendbuf + root*count. */
nodusResult_t nodusScatter(const void* sendbuf, void* recvbuf, size_t count,
                           nodusDataType_t datatype, int root, nodusComm_t comm);
/* Rank i's sendcount elements land at recvbuf + displs[i] on every rank.
 * recvcounts and displs are the same on every rank, and recvcounts[i] is rank
 * i's sendcount; receive blocks must not overlap. In place when
 * sendbuf == recvbuf + displs[rank]. */
nodusResult_t nodusAllGatherV(const void* sendbuf, size_t sendcount, void* recvbuf,
                              const size_t* recvcounts, const size_t* displs,
                              nodusDataType_t datatype, nodusComm_t comm);
/* sendbuf holds the sum of recvcounts elements: block i (recvcounts[i]
 * elements, after those of the ranks before i) reduced over all ranks lands
 * in rank i's recvbuf. recvcounts is the same on every rank (MPI's
 * Reduce_scatter). In place when recvbuf == sendbuf + (recvcounts[0] + ... +
 * recvcounts[rank-1]). */
nodusResult_t nodusReduceScatterV(const void* sendbuf, void* recvbuf, const size_t* recvcounts,
                                  nodusDataType_t datatype, nodusRedOp_t op, nodusComm_t comm);

/* Point-to-point. A Send must be matched by a Recv of the same count and type
 * on `peer`; pairs between two ranks match in issue order. Inside a group,
 * sends and receives progress together, so exchanges never deadlock. */
nodusResult_t nodusSend(const void* sendbuf, size_t count, nodusDataType_t datatype, int peer,
                        nodusComm_t comm);
nodusResult_t nodusRecv(void* recvbuf, size_t count, nodusDataType_t datatype, int peer,
                        nodusComm_t comm);

/* ---- Collectives (non-blocking) ------------------------------------------ */
/* Same arguments plus a request that the caller completes with nodusWait or
 * polls with nodusTest, and releases with nodusRequestFree. */

nodusResult_t nodusIallReduce(const void* sendbuf, void* recvbuf, size_t count,
                              nodusDataType_t datatype, nodusRedOp_t op, nodusComm_t comm,
                              nodusRequest_t* request);
nodusResult_t nodusIallGather(const void* sendbuf, void* recvbuf, size_t sendcount,
                              nodusDataType_t datatype, nodusComm_t comm, nodusRequest_t* request);
nodusResult_t nodusIallGatherList(const void* sendbuf, void* const* recvbufs, size_t sendcount,
                                  nodusDataType_t datatype, nodusComm_t comm, nodusRequest_t* request);
nodusResult_t nodusIreduceScatter(const void* sendbuf, void* recvbuf, size_t recvcount,
                                  nodusDataType_t datatype, nodusRedOp_t op, nodusComm_t comm,
                                  nodusRequest_t* request);
nodusResult_t nodusIbroadcast(const void* sendbuf, void* recvbuf, size_t count,
                              nodusDataType_t datatype, int root, nodusComm_t comm,
                              nodusRequest_t* request);
nodusResult_t nodusIreduce(const void* sendbuf, void* recvbuf, size_t count,
                           nodusDataType_t datatype, nodusRedOp_t op, int root, nodusComm_t comm,
                           nodusRequest_t* request);
nodusResult_t nodusIbarrier(nodusComm_t comm, nodusRequest_t* request);
nodusResult_t nodusIallToAll(const void* sendbuf, void* recvbuf, size_t count,
                             nodusDataType_t datatype, nodusComm_t comm, nodusRequest_t* request);
nodusResult_t nodusIallToAllV(const void* sendbuf, const size_t* sendcounts, const size_t* sdispls,
                              void* recvbuf, const size_t* recvcounts, const size_t* rdispls,
                              nodusDataType_t datatype, nodusComm_t comm, nodusRequest_t* request);
nodusResult_t nodusIgather(const void* sendbuf, void* recvbuf, size_t count,
                           nodusDataType_t datatype, int root, nodusComm_t comm,
                           nodusRequest_t* request);
nodusResult_t nodusIscatter(const void* sendbuf, void* recvbuf, size_t count,
                            nodusDataType_t datatype, int root, nodusComm_t comm,
                            nodusRequest_t* request);
nodusResult_t nodusIallGatherV(const void* sendbuf, size_t sendcount, void* recvbuf,
                               const size_t* recvcounts, const size_t* displs,
                               nodusDataType_t datatype, nodusComm_t comm, nodusRequest_t* request);
nodusResult_t nodusIreduceScatterV(const void* sendbuf, void* recvbuf, const size_t* recvcounts,
                                   nodusDataType_t datatype, nodusRedOp_t op, nodusComm_t comm,
                                   nodusRequest_t* request);
nodusResult_t nodusIsend(const void* sendbuf, size_t count, nodusDataType_t datatype, int peer,
                         nodusComm_t comm, nodusRequest_t* request);
nodusResult_t nodusIrecv(void* recvbuf, size_t count, nodusDataType_t datatype, int peer,
                         nodusComm_t comm, nodusRequest_t* request);

/* Sets *done to 1 and returns the operation's result once it has completed;
 * otherwise sets *done to 0 and returns nodusSuccess. */
nodusResult_t nodusTest(nodusRequest_t request, int* done);
/* Blocks until the operation completes and returns its result. A caller that
 * waits while nothing of its communicator is running does the queued work on
 * its own thread (no hand-off to the progress thread). */
nodusResult_t nodusWait(nodusRequest_t request);
/* nodusWait for at most timeoutMs milliseconds (< 0: no limit): returns
 * nodusInProgress, and the operation goes on, if it has not completed by then.
 * The caller runs the work itself only when timeoutMs is at least the
 * communicator's NODUS_TIMEOUT_MS (the operation then fails by itself first). */
nodusResult_t nodusWaitTimeout(nodusRequest_t request, int64_t timeoutMs);
/* Releases a request. Freeing one that has not completed first waits for it. */
nodusResult_t nodusRequestFree(nodusRequest_t request);

/* ---- Groups --------------------------------------------------------------- */
/* Between nodusGroupStart and nodusGroupEnd (per thread, nestable), calls are
 * only recorded; blocking calls return at once. nodusGroupEnd launches them
 * together and blocks until all are complete: a non-blocking call inside the
 * group gets a request that is complete when nodusGroupEnd returns. */
nodusResult_t nodusGroupStart(void);
nodusResult_t nodusGroupEnd(void);

/* ---- Introspection (tools: nodus-perf -a, nodus-topo) --------------------- */
typedef enum {
  nodusCollAllReduce = 0,
  nodusCollAllGather = 1,
  nodusCollReduceScatter = 2,
  nodusCollBroadcast = 3,
  nodusCollReduce = 4,
  nodusCollAllToAll = 5,
  nodusCollGather = 6,
  nodusCollScatter = 7,
  nodusNumColls = 8,
  nodusCollectiveEnumMin_ = -0x7fffffff - 1, /* not collectives: see nodusResultEnumMin_ */
  nodusCollectiveEnumMax_ = 0x7fffffff
} nodusCollective_t;

/* Comma-separated names of the algorithms this library implements, the
 * values NODUS_ALGO accepts. */
const char* nodusAlgorithmNames(void);

/* The algorithm `comm` uses for a call with these arguments (count as the
 * collective takes it; root ignored where there is none), NODUS_ALGO
 * included. *name stays valid while the library is loaded. */
nodusResult_t nodusCommGetAlgorithm(nodusComm_t comm, nodusCollective_t coll, size_t count,
                                    nodusDataType_t datatype, int root, const char** name);

#ifdef __cplusplus
}
#endif

#endif /* NODUS_NODUS_H */
