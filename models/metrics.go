package models

// This file is the metric vocabulary shared by the real collectors
// (collector/), the cluster twin (cluster/) and the analyzers: every series
// an agent exposes is described here once, so that the twin renders exactly
// what a real agent serves and docs/metrics.md is generated from one table.
//
// Conventions (Prometheus): the ballast_ prefix, base units (bytes, seconds,
// celsius, ratio 0..1, watts, hertz, joules), _total on counters. The labels
// listed per metric are those the agent itself sets; the mds scraper adds
// job, instance and the target's labels, and node and role from the agent's
// ballast_build_info (see docs/metrics.md).

// MetricType is the Prometheus type of a metric family.
type MetricType string

// Metric types used by ballast.
const (
	MetricCounter MetricType = "counter"
	MetricGauge   MetricType = "gauge"
)

// MetricDesc describes one metric family: its name, type, unit, help text,
// the labels the agent attaches, and the collector that emits it.
type MetricDesc struct {
	Name      string
	Type      MetricType
	Unit      string
	Help      string
	Labels    []string
	Collector string
}

// Collector self-metrics, set by the collector framework for every
// collector on every scrape.
const (
	MetricCollectorSuccess  = "ballast_collector_success"
	MetricCollectorDuration = "ballast_collector_duration_seconds"
	MetricCollectorDeviceUp = "ballast_collector_device_up"
	MetricCollectorSkipped  = "ballast_collector_field_unavailable"
)

// Drive series common to NVMe, ATA and SCSI drives (collectors nvme and
// smartctl). For NVMe drives the temperature is the composite temperature.
const (
	MetricDriveInfo          = "ballast_drive_info"
	MetricDriveSmartHealthy  = "ballast_drive_smart_healthy"
	MetricDriveCapacity      = "ballast_drive_capacity_bytes"
	MetricDriveTemperature   = "ballast_drive_temperature_celsius"
	MetricDrivePowerOn       = "ballast_drive_power_on_seconds_total"
	MetricDrivePowerCycles   = "ballast_drive_power_cycles_total"
	MetricSCSIGrownDefects   = "ballast_scsi_grown_defects"
	MetricSCSIUncorrected    = "ballast_scsi_uncorrected_errors_total"
	MetricATAAttributeValue  = "ballast_ata_attribute_value"
	MetricATAAttributeWorst  = "ballast_ata_attribute_worst"
	MetricATAAttributeThresh = "ballast_ata_attribute_threshold"
	MetricATAAttributeRaw    = "ballast_ata_attribute_raw"
)

// NVMe SMART/Health log (log page 0x02) series, collectors nvme and smartctl.
const (
	MetricNVMeCriticalWarning      = "ballast_nvme_critical_warning"
	MetricNVMeTemperatureSensor    = "ballast_nvme_temperature_sensor_celsius"
	MetricNVMeAvailableSpare       = "ballast_nvme_available_spare_ratio"
	MetricNVMeAvailableSpareThresh = "ballast_nvme_available_spare_threshold_ratio"
	MetricNVMePercentageUsed       = "ballast_nvme_percentage_used_ratio"
	MetricNVMeDataRead             = "ballast_nvme_data_read_bytes_total"
	MetricNVMeDataWritten          = "ballast_nvme_data_written_bytes_total"
	MetricNVMeHostReadCommands     = "ballast_nvme_host_read_commands_total"
	MetricNVMeHostWriteCommands    = "ballast_nvme_host_write_commands_total"
	MetricNVMeControllerBusy       = "ballast_nvme_controller_busy_seconds_total"
	MetricNVMeUnsafeShutdowns      = "ballast_nvme_unsafe_shutdowns_total"
	MetricNVMeMediaErrors          = "ballast_nvme_media_errors_total"
	MetricNVMeErrorLogEntries      = "ballast_nvme_error_log_entries_total"
	MetricNVMeWarningTempTime      = "ballast_nvme_warning_temperature_seconds_total"
	MetricNVMeCriticalTempTime     = "ballast_nvme_critical_temperature_seconds_total"
)

// Block device series from /proc/diskstats (collector diskstats).
const (
	MetricDiskReads          = "ballast_disk_reads_completed_total"
	MetricDiskReadsMerged    = "ballast_disk_reads_merged_total"
	MetricDiskReadBytes      = "ballast_disk_read_bytes_total"
	MetricDiskReadTime       = "ballast_disk_read_time_seconds_total"
	MetricDiskWrites         = "ballast_disk_writes_completed_total"
	MetricDiskWritesMerged   = "ballast_disk_writes_merged_total"
	MetricDiskWrittenBytes   = "ballast_disk_written_bytes_total"
	MetricDiskWriteTime      = "ballast_disk_write_time_seconds_total"
	MetricDiskIOInFlight     = "ballast_disk_io_now"
	MetricDiskIOTime         = "ballast_disk_io_time_seconds_total"
	MetricDiskIOTimeWeighted = "ballast_disk_io_time_weighted_seconds_total"
	MetricDiskDiscards       = "ballast_disk_discards_completed_total"
	MetricDiskDiscardsMerged = "ballast_disk_discards_merged_total"
	MetricDiskDiscardedBytes = "ballast_disk_discarded_bytes_total"
	MetricDiskDiscardTime    = "ballast_disk_discard_time_seconds_total"
	MetricDiskFlushes        = "ballast_disk_flush_requests_total"
	MetricDiskFlushTime      = "ballast_disk_flush_requests_time_seconds_total"
	MetricIOPressureStalled  = "ballast_io_pressure_stalled_seconds_total"
)

// NFS client series from /proc/self/mountstats and /proc/net/rpc/nfs
// (collector mountstats).
const (
	MetricNFSClientMountInfo        = "ballast_nfs_client_mount_info"
	MetricNFSClientAge              = "ballast_nfs_client_mount_age_seconds"
	MetricNFSClientReadBytes        = "ballast_nfs_client_read_bytes_total"
	MetricNFSClientWriteBytes       = "ballast_nfs_client_write_bytes_total"
	MetricNFSClientDirectReadBytes  = "ballast_nfs_client_direct_read_bytes_total"
	MetricNFSClientDirectWriteBytes = "ballast_nfs_client_direct_write_bytes_total"
	MetricNFSClientServerReadBytes  = "ballast_nfs_client_server_read_bytes_total"
	MetricNFSClientServerWriteBytes = "ballast_nfs_client_server_write_bytes_total"
	MetricNFSClientOps              = "ballast_nfs_client_operations_total"
	MetricNFSClientOpTransmissions  = "ballast_nfs_client_operation_transmissions_total"
	MetricNFSClientOpRetransmits    = "ballast_nfs_client_operation_retransmissions_total"
	MetricNFSClientOpMajorTimeouts  = "ballast_nfs_client_operation_major_timeouts_total"
	MetricNFSClientOpSentBytes      = "ballast_nfs_client_operation_sent_bytes_total"
	MetricNFSClientOpReceivedBytes  = "ballast_nfs_client_operation_received_bytes_total"
	MetricNFSClientOpQueueTime      = "ballast_nfs_client_operation_queue_seconds_total"
	MetricNFSClientOpRTT            = "ballast_nfs_client_operation_rtt_seconds_total"
	MetricNFSClientOpExecTime       = "ballast_nfs_client_operation_execute_seconds_total"
	MetricNFSClientOpErrors         = "ballast_nfs_client_operation_errors_total"
	MetricNFSClientXprtSends        = "ballast_nfs_client_transport_sends_total"
	MetricNFSClientXprtReceives     = "ballast_nfs_client_transport_receives_total"
	MetricNFSClientXprtBadXIDs      = "ballast_nfs_client_transport_bad_xids_total"
	MetricNFSClientRPCCalls         = "ballast_nfs_client_rpc_calls_total"
	MetricNFSClientRPCRetransmits   = "ballast_nfs_client_rpc_retransmissions_total"
)

// NFS server series from /proc/net/rpc/nfsd and /proc/fs/nfsd/pool_stats
// (collector nfsd).
const (
	MetricNFSDThreads            = "ballast_nfsd_threads"
	MetricNFSDOps                = "ballast_nfsd_operations_total"
	MetricNFSDReadBytes          = "ballast_nfsd_read_bytes_total"
	MetricNFSDWrittenBytes       = "ballast_nfsd_written_bytes_total"
	MetricNFSDRPCCalls           = "ballast_nfsd_rpc_calls_total"
	MetricNFSDRPCBadCalls        = "ballast_nfsd_rpc_bad_calls_total"
	MetricNFSDPackets            = "ballast_nfsd_packets_total"
	MetricNFSDReplyCache         = "ballast_nfsd_reply_cache_total"
	MetricNFSDPoolPacketsArrived = "ballast_nfsd_pool_packets_arrived_total"
	MetricNFSDPoolSocketsQueued  = "ballast_nfsd_pool_sockets_enqueued_total"
	MetricNFSDPoolThreadsWoken   = "ballast_nfsd_pool_threads_woken_total"
	MetricNFSDPoolThreadsTimeout = "ballast_nfsd_pool_threads_timedout_total"
)

// Network interface series from /proc/net/dev (collector netdev).
const (
	MetricNetReceiveBytes    = "ballast_network_receive_bytes_total"
	MetricNetReceivePackets  = "ballast_network_receive_packets_total"
	MetricNetReceiveErrors   = "ballast_network_receive_errors_total"
	MetricNetReceiveDrops    = "ballast_network_receive_drops_total"
	MetricNetTransmitBytes   = "ballast_network_transmit_bytes_total"
	MetricNetTransmitPackets = "ballast_network_transmit_packets_total"
	MetricNetTransmitErrors  = "ballast_network_transmit_errors_total"
	MetricNetTransmitDrops   = "ballast_network_transmit_drops_total"
	// MetricNetSpeed is the link speed from /sys/class/net/IFACE/speed
	// (Mb/s there), in bytes per second as node_exporter's
	// node_network_speed_bytes; absent for links without a speed.
	MetricNetSpeed = "ballast_network_speed_bytes"
)

// Read-ahead series (collector readahead).
const (
	MetricBlockReadahead = "ballast_block_readahead_bytes"
	MetricNFSReadahead   = "ballast_nfs_client_readahead_bytes"
)

// Filesystem series from statfs(2) on the mounted block-device
// filesystems of /proc/self/mounts (collector filesystem): what fills on a
// data server is the filesystem it exports from each NVMe drive. Used
// bytes, as the capacity report reads them, are size − avail.
const (
	MetricFilesystemSize      = "ballast_filesystem_size_bytes"
	MetricFilesystemFree      = "ballast_filesystem_free_bytes"
	MetricFilesystemAvail     = "ballast_filesystem_avail_bytes"
	MetricFilesystemFiles     = "ballast_filesystem_files"
	MetricFilesystemFilesFree = "ballast_filesystem_files_free"
	MetricFilesystemReadonly  = "ballast_filesystem_readonly"
)

// GPU series (collector dcgm, from DCGM, NVML or a dcgm-exporter endpoint).
const (
	MetricGPUInfo               = "ballast_gpu_info"
	MetricGPUSource             = "ballast_gpu_source_info"
	MetricGPUUtilization        = "ballast_gpu_utilization_ratio"
	MetricGPUMemCopyUtilization = "ballast_gpu_memory_copy_utilization_ratio"
	MetricGPUGraphicsActive     = "ballast_gpu_graphics_engine_active_ratio"
	MetricGPUSMActive           = "ballast_gpu_sm_active_ratio"
	MetricGPUSMOccupancy        = "ballast_gpu_sm_occupancy_ratio"
	MetricGPUTensorActive       = "ballast_gpu_tensor_active_ratio"
	MetricGPUDRAMActive         = "ballast_gpu_dram_active_ratio"
	MetricGPUMemoryUsed         = "ballast_gpu_memory_used_bytes"
	MetricGPUMemoryFree         = "ballast_gpu_memory_free_bytes"
	MetricGPUPCIeRx             = "ballast_gpu_pcie_receive_bytes_per_second"
	MetricGPUPCIeTx             = "ballast_gpu_pcie_transmit_bytes_per_second"
	MetricGPUNVLinkRx           = "ballast_gpu_nvlink_receive_bytes_per_second"
	MetricGPUNVLinkTx           = "ballast_gpu_nvlink_transmit_bytes_per_second"
	MetricGPUPower              = "ballast_gpu_power_watts"
	MetricGPUEnergy             = "ballast_gpu_energy_joules_total"
	MetricGPUTemperature        = "ballast_gpu_temperature_celsius"
	MetricGPUMemoryTemperature  = "ballast_gpu_memory_temperature_celsius"
	MetricGPUSMClock            = "ballast_gpu_sm_clock_hertz"
	MetricGPUMemoryClock        = "ballast_gpu_memory_clock_hertz"
	MetricGPULastXID            = "ballast_gpu_last_xid"
	MetricGPUXIDErrors          = "ballast_gpu_xid_errors_total"
	MetricGPUECCErrors          = "ballast_gpu_ecc_errors_total"
	MetricGPURemappedRows       = "ballast_gpu_remapped_rows_total"
	MetricGPURowRemapFailure    = "ballast_gpu_row_remap_failure"
	MetricGPUPCIeReplays        = "ballast_gpu_pcie_replays_total"
)

// Label sets shared by several families.
var (
	driveLabels = []string{"device", "serial", "model"}
	ataLabels   = []string{"device", "serial", "model", "attribute_id", "attribute"}
	diskLabels  = []string{"device"}
	mountLabels = []string{"mountpoint", "export"}
	opLabels    = []string{"mountpoint", "export", "operation"}
	netLabels   = []string{"device"}
	gpuLabels   = []string{"gpu", "uuid", "model"}
	fsLabels    = []string{"device", "mountpoint", "fstype"}
)

// Metrics is the table of every metric family a ballast agent can expose,
// grouped by collector. Collectors look their descriptors up here, the
// twin renders from it and docs/metrics.md is generated from it.
var Metrics = []MetricDesc{
	{MetricCollectorSuccess, MetricGauge, "", "1 when the collector's last run succeeded, 0 when it failed or timed out.", []string{"collector"}, "framework"},
	{MetricCollectorDuration, MetricGauge, "seconds", "Duration of the collector's last run.", []string{"collector"}, "framework"},
	{MetricCollectorDeviceUp, MetricGauge, "", "1 when the collector could read the device, 0 when it could not be opened or read (the reason is logged once).", []string{"collector", "device"}, "framework"},
	{MetricCollectorSkipped, MetricGauge, "", "1 for each field the collector skipped because the source does not support it (the reason is logged once).", []string{"collector", "field"}, "framework"},

	{MetricDriveInfo, MetricGauge, "", "Constant 1 carrying the identity of a drive.", []string{"device", "serial", "model", "firmware", "protocol"}, "nvme,smartctl"},
	{MetricDriveSmartHealthy, MetricGauge, "", "1 when the drive's overall SMART health self-assessment passed, 0 when it failed.", driveLabels, "nvme,smartctl"},
	{MetricDriveCapacity, MetricGauge, "bytes", "User capacity of the drive.", driveLabels, "nvme,smartctl"},
	{MetricDriveTemperature, MetricGauge, "celsius", "Current drive temperature (NVMe: composite temperature).", driveLabels, "nvme,smartctl"},
	{MetricDrivePowerOn, MetricCounter, "seconds", "Power-on time of the drive, at the hour resolution the drive reports.", driveLabels, "nvme,smartctl"},
	{MetricDrivePowerCycles, MetricCounter, "", "Number of power cycles of the drive.", driveLabels, "nvme,smartctl"},
	{MetricSCSIGrownDefects, MetricGauge, "", "Entries in the SCSI grown defect list.", driveLabels, "smartctl"},
	{MetricSCSIUncorrected, MetricCounter, "", "SCSI errors the drive could not correct, from the error counter log.", append(append([]string(nil), driveLabels...), "direction"), "smartctl"},
	{MetricATAAttributeValue, MetricGauge, "", "Normalised current value of an ATA SMART attribute (1..253, higher is better).", ataLabels, "nvme,smartctl"},
	{MetricATAAttributeWorst, MetricGauge, "", "Worst normalised value an ATA SMART attribute has had.", ataLabels, "nvme,smartctl"},
	{MetricATAAttributeThresh, MetricGauge, "", "Failure threshold of an ATA SMART attribute's normalised value.", ataLabels, "nvme,smartctl"},
	{MetricATAAttributeRaw, MetricGauge, "", "Raw value of an ATA SMART attribute (vendor-specific meaning; 48-bit).", ataLabels, "nvme,smartctl"},

	{MetricNVMeCriticalWarning, MetricGauge, "", "1 when the bit of the NVMe critical warning field is set: spare (bit 0), temperature (1), reliability (2), read_only (3), volatile_backup (4), pmr_read_only (5).", append(append([]string(nil), driveLabels...), "bit"), "nvme,smartctl"},
	{MetricNVMeTemperatureSensor, MetricGauge, "celsius", "NVMe temperature sensors 1..8 (only those the controller implements).", append(append([]string(nil), driveLabels...), "sensor"), "nvme,smartctl"},
	{MetricNVMeAvailableSpare, MetricGauge, "ratio", "Remaining spare capacity of the NVMe drive.", driveLabels, "nvme,smartctl"},
	{MetricNVMeAvailableSpareThresh, MetricGauge, "ratio", "Available spare below which the NVMe drive raises the spare critical warning.", driveLabels, "nvme,smartctl"},
	{MetricNVMePercentageUsed, MetricGauge, "ratio", "Vendor estimate of the NVMe drive's life used; may exceed 1.", driveLabels, "nvme,smartctl"},
	{MetricNVMeDataRead, MetricCounter, "bytes", "Data read by the host (data units of 1000 x 512 bytes, converted to bytes).", driveLabels, "nvme,smartctl"},
	{MetricNVMeDataWritten, MetricCounter, "bytes", "Data written by the host (data units of 1000 x 512 bytes, converted to bytes).", driveLabels, "nvme,smartctl"},
	{MetricNVMeHostReadCommands, MetricCounter, "", "Read commands completed by the controller.", driveLabels, "nvme,smartctl"},
	{MetricNVMeHostWriteCommands, MetricCounter, "", "Write commands completed by the controller.", driveLabels, "nvme,smartctl"},
	{MetricNVMeControllerBusy, MetricCounter, "seconds", "Time the controller was busy with I/O commands (reported in minutes).", driveLabels, "nvme,smartctl"},
	{MetricNVMeUnsafeShutdowns, MetricCounter, "", "Unsafe shutdowns of the NVMe drive.", driveLabels, "nvme,smartctl"},
	{MetricNVMeMediaErrors, MetricCounter, "", "Unrecovered data integrity errors (media and data integrity errors).", driveLabels, "nvme,smartctl"},
	{MetricNVMeErrorLogEntries, MetricCounter, "", "Error information log entries over the life of the controller.", driveLabels, "nvme,smartctl"},
	{MetricNVMeWarningTempTime, MetricCounter, "seconds", "Time the composite temperature was at or above the warning threshold (reported in minutes).", driveLabels, "nvme,smartctl"},
	{MetricNVMeCriticalTempTime, MetricCounter, "seconds", "Time the composite temperature was at or above the critical threshold (reported in minutes).", driveLabels, "nvme,smartctl"},

	{MetricDiskReads, MetricCounter, "", "Reads completed by the block device.", diskLabels, "diskstats"},
	{MetricDiskReadsMerged, MetricCounter, "", "Adjacent reads merged before being issued.", diskLabels, "diskstats"},
	{MetricDiskReadBytes, MetricCounter, "bytes", "Bytes read (sectors x 512).", diskLabels, "diskstats"},
	{MetricDiskReadTime, MetricCounter, "seconds", "Time spent by all reads; divided by reads it is the mean read latency.", diskLabels, "diskstats"},
	{MetricDiskWrites, MetricCounter, "", "Writes completed by the block device.", diskLabels, "diskstats"},
	{MetricDiskWritesMerged, MetricCounter, "", "Adjacent writes merged before being issued.", diskLabels, "diskstats"},
	{MetricDiskWrittenBytes, MetricCounter, "bytes", "Bytes written (sectors x 512).", diskLabels, "diskstats"},
	{MetricDiskWriteTime, MetricCounter, "seconds", "Time spent by all writes; divided by writes it is the mean write latency.", diskLabels, "diskstats"},
	{MetricDiskIOInFlight, MetricGauge, "", "I/Os currently in flight.", diskLabels, "diskstats"},
	{MetricDiskIOTime, MetricCounter, "seconds", "Time the device had I/O in flight; its rate is the utilisation.", diskLabels, "diskstats"},
	{MetricDiskIOTimeWeighted, MetricCounter, "seconds", "In-flight I/O count integrated over time; its rate is the mean queue depth.", diskLabels, "diskstats"},
	{MetricDiskDiscards, MetricCounter, "", "Discards completed (kernels 4.18+, 18-field rows).", diskLabels, "diskstats"},
	{MetricDiskDiscardsMerged, MetricCounter, "", "Discards merged (kernels 4.18+).", diskLabels, "diskstats"},
	{MetricDiskDiscardedBytes, MetricCounter, "bytes", "Bytes discarded (sectors x 512; kernels 4.18+).", diskLabels, "diskstats"},
	{MetricDiskDiscardTime, MetricCounter, "seconds", "Time spent by all discards (kernels 4.18+).", diskLabels, "diskstats"},
	{MetricDiskFlushes, MetricCounter, "", "Flush requests completed (kernels 5.5+, 20-field rows).", diskLabels, "diskstats"},
	{MetricDiskFlushTime, MetricCounter, "seconds", "Time spent by flush requests (kernels 5.5+).", diskLabels, "diskstats"},
	{MetricIOPressureStalled, MetricCounter, "seconds", "Time some (or all, kind=full) runnable tasks were stalled on I/O (/proc/pressure/io).", []string{"kind"}, "diskstats"},

	{MetricNFSClientMountInfo, MetricGauge, "", "Constant 1 per NFS mount, carrying the server, NFS version, transport and pNFS layout type.", []string{"mountpoint", "export", "server", "version", "protocol", "pnfs"}, "mountstats"},
	{MetricNFSClientAge, MetricGauge, "seconds", "Time since the NFS mount was made.", mountLabels, "mountstats"},
	{MetricNFSClientReadBytes, MetricCounter, "bytes", "Bytes read by applications through read(2) (NFS normal reads).", mountLabels, "mountstats"},
	{MetricNFSClientWriteBytes, MetricCounter, "bytes", "Bytes written by applications through write(2) (NFS normal writes).", mountLabels, "mountstats"},
	{MetricNFSClientDirectReadBytes, MetricCounter, "bytes", "Bytes read with O_DIRECT.", mountLabels, "mountstats"},
	{MetricNFSClientDirectWriteBytes, MetricCounter, "bytes", "Bytes written with O_DIRECT.", mountLabels, "mountstats"},
	{MetricNFSClientServerReadBytes, MetricCounter, "bytes", "Bytes read from the server with READ operations.", mountLabels, "mountstats"},
	{MetricNFSClientServerWriteBytes, MetricCounter, "bytes", "Bytes written to the server with WRITE operations.", mountLabels, "mountstats"},
	{MetricNFSClientOps, MetricCounter, "", "Requests of the NFS operation (LAYOUTGET, LAYOUTRETURN and LAYOUTSTATS included).", opLabels, "mountstats"},
	{MetricNFSClientOpTransmissions, MetricCounter, "", "Transmissions of the NFS operation, retransmissions included.", opLabels, "mountstats"},
	{MetricNFSClientOpRetransmits, MetricCounter, "", "Retransmissions of the NFS operation (transmissions minus requests).", opLabels, "mountstats"},
	{MetricNFSClientOpMajorTimeouts, MetricCounter, "", "Major timeouts of the NFS operation.", opLabels, "mountstats"},
	{MetricNFSClientOpSentBytes, MetricCounter, "bytes", "Bytes sent for the NFS operation, RPC headers included.", opLabels, "mountstats"},
	{MetricNFSClientOpReceivedBytes, MetricCounter, "bytes", "Bytes received for the NFS operation, RPC headers included.", opLabels, "mountstats"},
	{MetricNFSClientOpQueueTime, MetricCounter, "seconds", "Time requests of the NFS operation waited in the client queue before transmission.", opLabels, "mountstats"},
	{MetricNFSClientOpRTT, MetricCounter, "seconds", "Round-trip time of the NFS operation summed over requests; divided by requests it is the mean RTT.", opLabels, "mountstats"},
	{MetricNFSClientOpExecTime, MetricCounter, "seconds", "Time from submission to completion of the NFS operation summed over requests.", opLabels, "mountstats"},
	{MetricNFSClientOpErrors, MetricCounter, "", "Requests of the NFS operation that completed with an error (kernels 5.3+).", opLabels, "mountstats"},
	{MetricNFSClientXprtSends, MetricCounter, "", "RPC requests sent on the mount's transport.", mountLabels, "mountstats"},
	{MetricNFSClientXprtReceives, MetricCounter, "", "RPC replies received on the mount's transport.", mountLabels, "mountstats"},
	{MetricNFSClientXprtBadXIDs, MetricCounter, "", "Replies whose XID matched no outstanding request.", mountLabels, "mountstats"},
	{MetricNFSClientRPCCalls, MetricCounter, "", "RPC calls made by the NFS client (all mounts, /proc/net/rpc/nfs).", nil, "mountstats"},
	{MetricNFSClientRPCRetransmits, MetricCounter, "", "RPC retransmissions by the NFS client (all mounts, /proc/net/rpc/nfs).", nil, "mountstats"},

	{MetricNFSDThreads, MetricGauge, "", "nfsd threads configured.", nil, "nfsd"},
	{MetricNFSDOps, MetricCounter, "", "Operations served by nfsd, per NFS version and operation.", []string{"version", "operation"}, "nfsd"},
	{MetricNFSDReadBytes, MetricCounter, "bytes", "Bytes read from disk by nfsd.", nil, "nfsd"},
	{MetricNFSDWrittenBytes, MetricCounter, "bytes", "Bytes written to disk by nfsd.", nil, "nfsd"},
	{MetricNFSDRPCCalls, MetricCounter, "", "RPC calls received by nfsd.", nil, "nfsd"},
	{MetricNFSDRPCBadCalls, MetricCounter, "", "RPC calls nfsd rejected, per reason (fmt, auth, client).", []string{"reason"}, "nfsd"},
	{MetricNFSDPackets, MetricCounter, "", "Network packets received by nfsd, per protocol.", []string{"protocol"}, "nfsd"},
	{MetricNFSDReplyCache, MetricCounter, "", "Reply cache lookups of nfsd, per result (hit, miss, nocache).", []string{"result"}, "nfsd"},
	{MetricNFSDPoolPacketsArrived, MetricCounter, "", "Packets that arrived at the nfsd thread pool.", []string{"pool"}, "nfsd"},
	{MetricNFSDPoolSocketsQueued, MetricCounter, "", "Times a socket was queued because no nfsd thread was idle; a rising rate means too few threads.", []string{"pool"}, "nfsd"},
	{MetricNFSDPoolThreadsWoken, MetricCounter, "", "Times an idle nfsd thread was woken to serve a socket.", []string{"pool"}, "nfsd"},
	{MetricNFSDPoolThreadsTimeout, MetricCounter, "", "Times an nfsd thread timed out waiting for work.", []string{"pool"}, "nfsd"},

	{MetricNetReceiveBytes, MetricCounter, "bytes", "Bytes received by the network interface.", netLabels, "netdev"},
	{MetricNetReceivePackets, MetricCounter, "", "Packets received by the network interface.", netLabels, "netdev"},
	{MetricNetReceiveErrors, MetricCounter, "", "Receive errors of the network interface.", netLabels, "netdev"},
	{MetricNetReceiveDrops, MetricCounter, "", "Received packets dropped by the network interface.", netLabels, "netdev"},
	{MetricNetTransmitBytes, MetricCounter, "bytes", "Bytes transmitted by the network interface.", netLabels, "netdev"},
	{MetricNetTransmitPackets, MetricCounter, "", "Packets transmitted by the network interface.", netLabels, "netdev"},
	{MetricNetTransmitErrors, MetricCounter, "", "Transmit errors of the network interface.", netLabels, "netdev"},
	{MetricNetTransmitDrops, MetricCounter, "", "Transmitted packets dropped by the network interface.", netLabels, "netdev"},
	{MetricNetSpeed, MetricGauge, "bytes", "Link speed of the network interface in bytes per second, from /sys/class/net/IFACE/speed; absent where the kernel reports none (virtual or down links, speed -1).", netLabels, "netdev"},

	{MetricBlockReadahead, MetricGauge, "bytes", "Read-ahead window of the block device (/sys/block/<dev>/queue/read_ahead_kb).", []string{"device"}, "readahead"},
	{MetricNFSReadahead, MetricGauge, "bytes", "Read-ahead window of the NFS mount's backing device info (/sys/class/bdi/<major:minor>/read_ahead_kb).", []string{"mountpoint", "export", "bdi"}, "readahead"},

	{MetricFilesystemSize, MetricGauge, "bytes", "Size of the filesystem (statfs f_blocks x f_frsize); device is the block device without /dev/.", fsLabels, "filesystem"},
	{MetricFilesystemFree, MetricGauge, "bytes", "Free space, blocks reserved for root included (f_bfree x f_frsize).", fsLabels, "filesystem"},
	{MetricFilesystemAvail, MetricGauge, "bytes", "Space available to unprivileged writers (f_bavail x f_frsize); size - avail is what the capacity report counts as used.", fsLabels, "filesystem"},
	{MetricFilesystemFiles, MetricGauge, "", "Inodes of the filesystem (f_files; on XFS a ceiling that moves with free space).", fsLabels, "filesystem"},
	{MetricFilesystemFilesFree, MetricGauge, "", "Free inodes (f_ffree).", fsLabels, "filesystem"},
	{MetricFilesystemReadonly, MetricGauge, "", "1 when the filesystem is mounted read-only (an XFS or ext4 shutdown after I/O errors remounts it so).", fsLabels, "filesystem"},

	{MetricGPUInfo, MetricGauge, "", "Constant 1 per GPU carrying its identity.", []string{"gpu", "uuid", "model", "pci_bus_id", "driver"}, "dcgm"},
	{MetricGPUSource, MetricGauge, "", "Constant 1 naming what the dcgm collector read the GPUs through: libdcgm, nvml (the driver's libnvidia-ml, when DCGM is absent: no profiling fields; XIDs from NVML's events) or dcgm-exporter.", []string{"source"}, "dcgm"},
	{MetricGPUUtilization, MetricGauge, "ratio", "Fraction of time a kernel ran on the GPU (DCGM_FI_DEV_GPU_UTIL).", gpuLabels, "dcgm"},
	{MetricGPUMemCopyUtilization, MetricGauge, "ratio", "Fraction of time the memory copy engine was busy (DCGM_FI_DEV_MEM_COPY_UTIL).", gpuLabels, "dcgm"},
	{MetricGPUGraphicsActive, MetricGauge, "ratio", "Fraction of time the graphics or compute engine was active (DCGM_FI_PROF_GR_ENGINE_ACTIVE).", gpuLabels, "dcgm"},
	{MetricGPUSMActive, MetricGauge, "ratio", "Fraction of time at least one warp was active on an SM, averaged over SMs (DCGM_FI_PROF_SM_ACTIVE).", gpuLabels, "dcgm"},
	{MetricGPUSMOccupancy, MetricGauge, "ratio", "Resident warps per SM relative to the maximum (DCGM_FI_PROF_SM_OCCUPANCY).", gpuLabels, "dcgm"},
	{MetricGPUTensorActive, MetricGauge, "ratio", "Fraction of cycles the tensor pipes were active (DCGM_FI_PROF_PIPE_TENSOR_ACTIVE).", gpuLabels, "dcgm"},
	{MetricGPUDRAMActive, MetricGauge, "ratio", "Fraction of cycles the device memory interface was active (DCGM_FI_PROF_DRAM_ACTIVE).", gpuLabels, "dcgm"},
	{MetricGPUMemoryUsed, MetricGauge, "bytes", "Framebuffer memory used (DCGM_FI_DEV_FB_USED).", gpuLabels, "dcgm"},
	{MetricGPUMemoryFree, MetricGauge, "bytes", "Framebuffer memory free (DCGM_FI_DEV_FB_FREE).", gpuLabels, "dcgm"},
	{MetricGPUPCIeRx, MetricGauge, "bytes/second", "PCIe bytes received by the GPU per second (DCGM_FI_PROF_PCIE_RX_BYTES).", gpuLabels, "dcgm"},
	{MetricGPUPCIeTx, MetricGauge, "bytes/second", "PCIe bytes transmitted by the GPU per second (DCGM_FI_PROF_PCIE_TX_BYTES).", gpuLabels, "dcgm"},
	{MetricGPUNVLinkRx, MetricGauge, "bytes/second", "NVLink bytes received per second (DCGM_FI_PROF_NVLINK_RX_BYTES).", gpuLabels, "dcgm"},
	{MetricGPUNVLinkTx, MetricGauge, "bytes/second", "NVLink bytes transmitted per second (DCGM_FI_PROF_NVLINK_TX_BYTES).", gpuLabels, "dcgm"},
	{MetricGPUPower, MetricGauge, "watts", "Power drawn by the GPU (DCGM_FI_DEV_POWER_USAGE).", gpuLabels, "dcgm"},
	{MetricGPUEnergy, MetricCounter, "joules", "Energy consumed since the driver loaded (DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION, reported in mJ).", gpuLabels, "dcgm"},
	{MetricGPUTemperature, MetricGauge, "celsius", "GPU core temperature (DCGM_FI_DEV_GPU_TEMP).", gpuLabels, "dcgm"},
	{MetricGPUMemoryTemperature, MetricGauge, "celsius", "GPU memory temperature (DCGM_FI_DEV_MEMORY_TEMP).", gpuLabels, "dcgm"},
	{MetricGPUSMClock, MetricGauge, "hertz", "SM clock (DCGM_FI_DEV_SM_CLOCK, reported in MHz).", gpuLabels, "dcgm"},
	{MetricGPUMemoryClock, MetricGauge, "hertz", "Memory clock (DCGM_FI_DEV_MEM_CLOCK, reported in MHz).", gpuLabels, "dcgm"},
	{MetricGPULastXID, MetricGauge, "", "Value of the last XID error (DCGM_FI_DEV_XID_ERRORS; through NVML, the last XID event since the agent started); 0 when none.", gpuLabels, "dcgm"},
	{MetricGPUXIDErrors, MetricCounter, "", "XID errors seen since the agent started (nvml source only: NVML's XID events; DCGM and dcgm-exporter give only the last XID). increase() > 0 catches a repeat of the same XID, which ballast_gpu_last_xid cannot show.", gpuLabels, "dcgm"},
	{MetricGPUECCErrors, MetricCounter, "", "ECC errors since the last driver load, per type (single_bit, double_bit).", append(append([]string(nil), gpuLabels...), "type"), "dcgm"},
	{MetricGPURemappedRows, MetricCounter, "", "Memory rows remapped, per cause (correctable, uncorrectable).", append(append([]string(nil), gpuLabels...), "cause"), "dcgm"},
	{MetricGPURowRemapFailure, MetricGauge, "", "1 when row remapping failed (DCGM_FI_DEV_ROW_REMAP_FAILURE).", gpuLabels, "dcgm"},
	{MetricGPUPCIeReplays, MetricCounter, "", "PCIe replays (DCGM_FI_DEV_PCIE_REPLAY_COUNTER).", gpuLabels, "dcgm"},
}

// LookupMetric returns the descriptor of the metric family called name.
func LookupMetric(name string) (MetricDesc, bool) {
	for _, d := range Metrics {
		if d.Name == name {
			return d, true
		}
	}
	return MetricDesc{}, false
}

// NVMeCriticalWarningBits names the bits of the NVMe SMART/Health log's
// critical warning byte (NVMe Base Specification 2.0, figure 207, byte 0),
// indexed by bit number; they are the values of the "bit" label.
var NVMeCriticalWarningBits = [...]string{"spare", "temperature", "reliability", "read_only", "volatile_backup", "pmr_read_only"}
