// Every knob braid reads, declared once: BRAID_PARAM(Ident, type, "ENV_NAME", "default", "documentation").
// NCCL's names for what NCCL has; BRAID_* for ours. Included several times with different BRAID_PARAM definitions.
// No include guard on purpose.

// Logging (read by src/common/logging.cc).
BRAID_PARAM(Debug, kString, "NCCL_DEBUG", "",
            "Log level: VERSION, WARN, ATTN (NCCL 2.32: WARN plus notices), INFO, ABORT or TRACE (unset: nothing).")
BRAID_PARAM(DebugSubsys, kString, "NCCL_DEBUG_SUBSYS", "INIT,BOOTSTRAP,ENV",
            "Comma list of subsystems logged at INFO/TRACE (INIT, COLL, P2P, SHM, NET, GRAPH, TUNING, ENV, ALLOC, "
            "CALL, PROXY, BOOTSTRAP, ALL); a leading ^ excludes the listed ones.")
BRAID_PARAM(DebugFile, kString, "NCCL_DEBUG_FILE", "", "Log file instead of stdout; %h is the host name, %p the pid.")

// Configuration files (read by the registry itself).
BRAID_PARAM(ConfFile, kString, "NCCL_CONF_FILE", "", "KEY=VALUE file read instead of ~/.nccl.conf.")

// Bootstrap.
BRAID_PARAM(CommId, kString, "NCCL_COMM_ID", "",
            "ip:port (or [ipv6]:port, host:port) of a fixed bootstrap root; rank 0 listens there.")
BRAID_PARAM(SocketIfname, kString, "NCCL_SOCKET_IFNAME", "",
            "Interfaces for bootstrap sockets and Socket-network devices: comma list of prefixes, '=' for exact "
            "names, '^' to exclude.")
BRAID_PARAM(SocketFamily, kString, "NCCL_SOCKET_FAMILY", "", "AF_INET or AF_INET6 to restrict bootstrap addresses.")
BRAID_PARAM(CudaDriver, kString, "BRAID_CUDA_DRIVER", "libcuda.so.1",
            "The CUDA driver library braid opens at run time (a soname or a path); build/fake_cuda/libcuda.so.1 is "
            "the strict fake the tests use (docs/cuda.md).")
BRAID_PARAM(Backend, kString, "BRAID_BACKEND", "",
            "host or cuda: the memory a communicator's collectives work on. Unset: cuda when the thread creating the "
            "communicator has a current CUDA context (the program loaded the driver and chose a device), host "
            "otherwise. Every rank must agree.")
BRAID_PARAM(MultiRankGpuEnable, kInt, "NCCL_MULTI_RANK_GPU_ENABLE", "0",
            "1: several ranks of a CUDA communicator may use one GPU (as NCCL 2.30); 0: init fails naming the ranks "
            "that share one.")
BRAID_PARAM(CudaDeviceMaxConnections, kInt, "CUDA_DEVICE_MAX_CONNECTIONS", "8",
            "The CUDA driver's hardware work queues per GPU (1-32), which it reads when the program initialises "
            "CUDA; braid only reads it, to warn when ranks sharing a GPU use more streams than it has queues.")
BRAID_PARAM(CudaThreads, kInt, "BRAID_CUDA_NTHREADS", "0",
            "Threads per CTA of braid's kernels (1-512); 0: 512 on a GPU, 32 on the fake driver's emulator.")
BRAID_PARAM(EmuChaos, kInt, "BRAID_EMU_CHAOS", "0",
            "Non-zero: the CTA emulator (kernels run through the fake CUDA driver) adds random yields and short "
            "sleeps, seeded by this value, at every barrier and back-off (docs/cuda.md).")
BRAID_PARAM(HostId, kString, "NCCL_HOSTID", "", "Host identity used to group ranks into nodes (default: boot id).")
BRAID_PARAM(BootstrapSecret, kString, "BRAID_BOOTSTRAP_SECRET", "",
            "A secret every rank of a job shares: the bootstrap authenticates connections by challenge-response "
            "(HMAC-SHA256) under a key derived from it and the unique id; it never crosses the wire. braidrun sets "
            "a fresh one per single-node job.")
BRAID_PARAM(CheckCalls, kInt, "BRAID_CHECK_CALLS", "0",
            "1: before each group runs, the ranks compare the collectives they queued (kind, count, datatype, op, "
            "root) and all fail with ncclInvalidUsage naming both calls when they differ. Costs one bootstrap "
            "message per peer per group (docs/hardening.md). Any rank setting it turns it on for the communicator.")
BRAID_PARAM(EncryptionKeyFile, kString, "BRAID_ENCRYPTION_KEY_FILE", "",
            "A file holding the job's TLS key (at least 32 bytes; one trailing newline is dropped; readable by its "
            "owner only): the bootstrap and Socket-network connections are TLS 1.3 as after ncclSetEncryption with "
            "NCCL_ENCRYPTION_MODE_PSK, for programs that do not call it. A call of ncclSetEncryption wins over it.")
BRAID_PARAM(FlightRecorderEntries, kInt, "BRAID_FLIGHT_RECORDER_ENTRIES", "1024",
            "Operations each communicator's flight recorder keeps (the last N, with state and timings); 0 records "
            "nothing.")
BRAID_PARAM(FlightRecorderFile, kString, "BRAID_FLIGHT_RECORDER_FILE", "",
            "Where a rank writes its flight recorder as JSON when an operation fails or times out, at ncclCommAbort "
            "and on SIGUSR1 (braid-info --dump); %h is the host name, %p the pid. Unset: no dumps. Read them with "
            "braid-info --analyze.")
BRAID_PARAM(Timeout, kInt, "BRAID_TIMEOUT", "60",
            "Seconds a rank waits for a peer without progress before failing with ncclRemoteError (bootstrap and "
            "collectives). 0 waits forever (still abortable).")

// Channels, buffers and execution.
BRAID_PARAM(BuffSize, kInt, "NCCL_BUFFSIZE", "4194304",
            "Bytes of the Simple-protocol FIFO of each connector (one per channel, peer and direction).")
BRAID_PARAM(LlBuffSize, kInt, "NCCL_LL_BUFFSIZE", "524288",
            "Bytes of the LL-protocol FIFO of each connector (8-byte lines, half of them flags), as in NCCL.")
BRAID_PARAM(P2pLlThreshold, kInt, "NCCL_P2P_LL_THRESHOLD", "16384",
            "Send/receive of at most this many bytes uses the LL protocol when NCCL_PROTO allows it (0: never).")
BRAID_PARAM(MinNChannels, kInt, "NCCL_MIN_NCHANNELS", "", "Lower bound on channels (worker threads) per communicator.")
BRAID_PARAM(MaxNChannels, kInt, "NCCL_MAX_NCHANNELS", "", "Upper bound on channels (worker threads) per communicator.")
BRAID_PARAM(CpuChannels, kInt, "BRAID_CPU_NCHANNELS", "2",
            "Channels of a host communicator before the NCCL_MIN/MAX_NCHANNELS bounds apply.")
BRAID_PARAM(InlineBytes, kInt, "BRAID_INLINE_BYTES", "262144",
            "Operations whose total bytes are below this run on the calling thread instead of the channel workers.")
BRAID_PARAM(Algo, kString, "NCCL_ALGO", "",
            "Algorithms allowed, NCCL's grammar: 'ring,nvls', '^nvls', 'allreduce:nvls;broadcast:ring'. braid "
            "implements Ring, Tree (all-reduce, broadcast, reduce) and NVLS (direct, on one host); the others are "
            "known names that leave nothing here.")
BRAID_PARAM(Proto, kString, "NCCL_PROTO", "",
            "Protocols allowed, NCCL's grammar (LL, LL128, Simple). The host backend runs LL and Simple on the ring "
            "and tree paths; NVLS (direct) is Simple only, as in NCCL; LL128 is defined for the CUDA backend.")
BRAID_PARAM(AlltoAllAlgo, kString, "BRAID_ALLTOALL_ALGO", "",
            "All-to-all schedule: pairwise (every pair at once) or bruck (log2(n) packed rounds); unset: the cost "
            "model chooses per size. braid's own knob: NCCL_ALGO has no name for all-to-all.")
BRAID_PARAM(Deterministic, kInt, "BRAID_DETERMINISTIC", "0",
            "1: reductions give bitwise identical results across runs, chunk sizes (NCCL_BUFFSIZE) and channel "
            "counts: all-reduce takes the direct path or a single tree, never the ring (slower on the FIFO path).")
BRAID_PARAM(TuningFile, kString, "BRAID_TUNING_FILE", "",
            "The selector's costs and pins (written by perf/calibrate; format in algorithms/selector/cost_model.h). "
            "Unset: built-in figures measured on a 2-core host. Must be the same file on every rank.")
BRAID_PARAM(TunerPlugin, kString, "NCCL_TUNER_PLUGIN", "",
            "Tuner plugin (ncclTunerPlugin_v3..v7, include/nccl_tuner.h): unset tries libnccl-tuner.so, then the net "
            "plugin's library; NAME tries libnccl-tuner-NAME.so, then NAME as given; 'none' loads no tuner.")
BRAID_PARAM(EnvPlugin, kString, "NCCL_ENV_PLUGIN", "",
            "Env plugin (ncclEnvPlugin_v1/v2, include/nccl_env.h) that answers for the environment: unset tries "
            "libnccl-env.so; NAME tries libnccl-env-NAME.so, then NAME as given; 'none' loads none. Its answers come "
            "before the environment's; this setting itself is never asked of it.")
BRAID_PARAM(ProfilerPlugin, kString, "NCCL_PROFILER_PLUGIN", "",
            "Profiler plugin (ncclProfiler_v4..v7, include/nccl_profiler.h): unset tries libnccl-profiler.so, then the "
            "net plugin's library; X tries X as given, then libnccl-profiler-X.so; a prefix of STATIC_PLUGIN: the "
            "program itself; 'none' loads no profiler.")
BRAID_PARAM(Direct, kInt, "BRAID_DIRECT", "1",
            "1: all-reduce, reduce-scatter and all-gather among ranks of one host run NVLS-style (direct loads and "
            "stores over shared memory); 0: always the ring.")
BRAID_PARAM(GpuDirectAuto, kInt, "BRAID_GPU_DIRECT_AUTO", "0",
            "1: on CUDA communicators whose GPUs are all joined by NVLink the selector takes the NVLS-style path "
            "wherever NCCL's symmetric-kernel model prices it below the FIFO path; 0 (until it has run on a GPU): "
            "only NCCL_ALGO or a tuning-file pin takes it. Used only when every rank sets 1.")
BRAID_PARAM(NvlsEnable, kInt, "NCCL_NVLS_ENABLE", "2",
            "NVLS multicast on CUDA communicators (one rank per GPU, multicast-capable devices, ranks of one host): "
            "0 never; 2 (default) where it can be set up, else the NVLS-style collectives use peer pointers with an "
            "INFO line saying why; 1 the same, but a communicator whose multicast setup fails fails its init. Never "
            "used with BRAID_DETERMINISTIC=1 (the switch's reduction order is its own).")
BRAID_PARAM(NvlsObjects, kInt, "BRAID_NVLS_OBJECTS", "64",
            "Multicast objects a CUDA communicator keeps at once (its NVLS areas' one and one per window with a "
            "multicast mapping; the driver's limit is about 128 per GPU): past it, windows register without one (0: "
            "the communicator gets none either, and its NVLS-style collectives use peer pointers).")
BRAID_PARAM(Cma, kInt, "BRAID_CMA", "0",
            "1: direct collectives between processes read and write peers' private (malloc) buffers with "
            "cross-memory attach (process_vm_readv/writev) where the kernel permits it; 0: such buffers take the "
            "ring (the default: on the 2-core VMs braid is measured on, the kernel's copy runs at half memcpy's "
            "speed and the ring wins, docs/perf.md).")
BRAID_PARAM(PlaceThreads, kInt, "BRAID_PLACE_THREADS", "1",
            "1: when no launcher restricted the processes' CPUs, this host's ranks fit them and no other host shares "
            "them, each rank's collectives run on a CPU of its own (local rank i on the i-th; the calling thread is "
            "moved there, its affinity mask left as it was); 0: wherever the scheduler puts them (it can keep two "
            "ranks on one CPU for a whole run: docs/perf.md).")
BRAID_PARAM(HostsShareCpus, kInt, "BRAID_HOSTS_SHARE_CPUS", "-1",
            "Whether a communicator's hosts (ranks grouped by NCCL_HOSTID) run on one machine's CPUs: -1 detects it "
            "(two hosts with the same kernel boot id: network namespaces or containers of one machine), 0 no, 1 yes. "
            "On shared CPUs the model never takes NVLSTree (NCCL_ALGO or a pin still can).")
BRAID_PARAM(DirectStageBytes, kInt, "BRAID_DIRECT_STAGE_BYTES", "16384",
            "Direct collectives whose input is at most this many bytes per rank are staged through the shared "
            "segment (any buffers, one barrier); larger ones work on the buffers themselves.")
BRAID_PARAM(SpinCount, kInt, "BRAID_SPIN_COUNT", "2000",
            "Idle polls before a waiting rank starts yielding its core (20 when not set and this host has more "
            "ranks than usable CPUs).")
BRAID_PARAM(WinEnable, kInt, "NCCL_WIN_ENABLE", "1",
            "0: ncclCommWindowRegister registers nothing and returns a NULL window (as NCCL 2.29+ does where windows "
            "are unsupported); one-sided operations then have no window to use.")
BRAID_PARAM(RmaStageBytes, kInt, "BRAID_RMA_STAGE_BYTES", "67108864",
            "CUDA communicators: pinned host memory that puts toward ranks of other hosts may hold staged and not yet "
            "sent (a put is staged in pieces of at most a sixteenth of it, at least 64 KB); a call waits for room.")
BRAID_PARAM(NumRmaCtx, kInt, "NCCL_NUM_RMA_CTX", "",
            "One-sided (ncclPutSignal, ncclSignal, ncclWaitSignal) contexts per communicator, overriding the config's "
            "numRmaCtx (default 1): their ctx argument lies in [0, this). 0 turns one-sided operations off.")
BRAID_PARAM(RmaEagerInit, kInt, "NCCL_RMA_EAGER_INIT", "",
            "1 sets up the one-sided signal area (and, across hosts, its connections) at communicator init, so "
            "ncclSignal and ncclWaitSignal work before any window registration; 0 (default) at the first "
            "ncclCommWindowRegister. Overrides the config's rmaEagerInit.")
BRAID_PARAM(
    RmaNet, kInt, "BRAID_RMA_NET", "1",
    "Communicators over several hosts: 1 connects every pair of ranks on different hosts at the first "
    "window registration, or at init with NCCL_RMA_EAGER_INIT=1 (about 1 MB of FIFOs per such peer), so "
    "one-sided operations reach them as messages; 0 does not, and one-sided operations toward other hosts are refused.")

// Transports.
BRAID_PARAM(ShmDisable, kInt, "NCCL_SHM_DISABLE", "0", "1 disables the shared-memory transport between processes.")
BRAID_PARAM(ShmDir, kString, "BRAID_SHM_DIR", "/dev/shm", "Directory that backs shared-memory segments.")

// Networks (transports/net/): the plugin loader and the built-in Socket, IB and OFI networks.
BRAID_PARAM(Net, kString, "NCCL_NET", "",
            "Network to use, by name, case-insensitive: Socket, IB, OFI (alias Libfabric) or an external plugin's "
            "name. Unset: external plugin, then IB when it has devices, then OFI on a hardware provider, then Socket.")
BRAID_PARAM(NetPlugin, kString, "NCCL_NET_PLUGIN", "",
            "External net plugin: unset tries libnccl-net.so; NAME tries libnccl-net-NAME.so, then NAME as given; "
            "'none' loads no plugin.")
BRAID_PARAM(IbDisable, kInt, "NCCL_IB_DISABLE", "0", "1: the InfiniBand verbs network is not used (Socket instead).")
BRAID_PARAM(IbHca, kString, "NCCL_IB_HCA", "",
            "HCAs the IB network uses: [^][=]hca[:port],... (prefix match unless '=', '^' excludes). Unset: all.")
BRAID_PARAM(IbGidIndex, kInt, "NCCL_IB_GID_INDEX", "-1",
            "GID index for RoCE/global addressing; -1: the port's LID when it has one, else GID 0.")
BRAID_PARAM(IbTimeout, kInt, "NCCL_IB_TIMEOUT", "20", "IB QP ACK timeout exponent: 4.096 us * 2^value (1..31).")
BRAID_PARAM(IbRetryCnt, kInt, "NCCL_IB_RETRY_CNT", "7", "IB QP transport retry count (0..7).")
BRAID_PARAM(OfiExcludeTcpIf, kString, "OFI_NCCL_EXCLUDE_TCP_IF", "lo,docker0",
            "Interfaces the OFI network leaves out on libfabric's tcp provider (exact names, comma list; "
            "aws-ofi-nccl's knob), unless nothing else is left: loopback cannot reach other hosts.")
BRAID_PARAM(IbverbsLib, kString, "BRAID_IBVERBS_LIB", "libibverbs.so.1",
            "braid-specific, for tests: the library the IB network dlopen()s for the verbs API (a soname or a "
            "path). One that cannot be loaded leaves IB with no devices.")
BRAID_PARAM(LibfabricLib, kString, "BRAID_LIBFABRIC_LIB", "libfabric.so.1",
            "braid-specific, for tests: the library the OFI network dlopen()s for libfabric (a soname or a path). "
            "One that cannot be loaded leaves OFI with no devices.")
BRAID_PARAM(SocketNthreads, kInt, "NCCL_SOCKET_NTHREADS", "1",
            "Helper threads per Socket-network connection (1..16); NTHREADS x NSOCKS_PERTHREAD must be <= 64.")
BRAID_PARAM(NsocksPerthread, kInt, "NCCL_NSOCKS_PERTHREAD", "1",
            "Data sockets per helper thread of a Socket-network connection (1..64); large messages are split "
            "over all of them.")

// Topology (read by topology/).
BRAID_PARAM(TopoFile, kString, "NCCL_TOPO_FILE", "",
            "NCCL topology XML (version 1) loaded instead of discovery; GPUs discovered on this host but missing "
            "from it are added. Unset: /var/run/nvidia-topologyd/virtualTopology.xml when that file exists.")
BRAID_PARAM(TopoDumpFile, kString, "NCCL_TOPO_DUMP_FILE", "",
            "Writes this host's topology XML (NCCL's schema) at init.")
BRAID_PARAM(TopoDumpFileRank, kInt, "NCCL_TOPO_DUMP_FILE_RANK", "0", "The rank that writes NCCL_TOPO_DUMP_FILE.")
BRAID_PARAM(HwlocXml, kString, "BRAID_HWLOC_XML", "",
            "hwloc XML (from `lstopo --of xml`) discovered instead of this machine, to replay another host.")
BRAID_PARAM(GraphFile, kString, "NCCL_GRAPH_FILE", "", "NCCL graph XML (rings/trees) used instead of the search.")
BRAID_PARAM(GraphDumpFile, kString, "NCCL_GRAPH_DUMP_FILE", "", "Writes the searched rings/trees (NCCL graph XML).")
BRAID_PARAM(GraphDumpFileRank, kInt, "NCCL_GRAPH_DUMP_FILE_RANK", "0", "The rank that writes NCCL_GRAPH_DUMP_FILE.")
BRAID_PARAM(P2pLevel, kString, "NCCL_P2P_LEVEL", "",
            "Farthest GPU pair path that uses P2P: LOC, NVL, PIX, PXB, PHB or SYS (or 0-5). Default PXB.")
BRAID_PARAM(P2pDisable, kInt, "NCCL_P2P_DISABLE", "0", "1: GPU pairs never use P2P (they go through host memory).")
BRAID_PARAM(NetGdrLevel, kString, "NCCL_NET_GDR_LEVEL", "",
            "Farthest GPU-NIC path that uses GPUDirect RDMA (path type name). Default PXB.")
BRAID_PARAM(PxnDisable, kInt, "NCCL_PXN_DISABLE", "0", "1: GPUs never reach a NIC through a peer GPU (PXN).")
BRAID_PARAM(NvbDisable, kInt, "NCCL_NVB_DISABLE", "0", "1: NVLink traffic never relays through a third GPU (NVB).")
BRAID_PARAM(CrossNic, kInt, "NCCL_CROSS_NIC", "2",
            "0: a ring leaves a node on the NIC (rail) it entered; 1: any NIC; 2: rail-aligned first, else any.")
