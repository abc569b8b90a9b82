"""Every field the Slurm parsers know, per source, as the real outputs of the versions
tested (tests/broker/backends/slurm/fixtures/<version>/, captured by capture_samples.sh)
print them.  A field outside these sets is "unknown" (fields.py): the contract tests fail
on it, production keeps its raw text and logs it once.

Adding a field here means: it was seen in a real output, and the parser either reads it
or has no use for it.  Generated from the fixtures, then reviewed; sorted for diffs.
"""

SCONTROL_NODE = frozenset({
    'ActiveFeatures', 'AllocMem', 'AllocTRES', 'Arch', 'AvailableFeatures', 'AveWatts',
    'Boards', 'BootTime', 'CPUAlloc', 'CPUEfctv', 'CPULoad', 'CPUTot', 'CapWatts', 'CfgTRES',
    'CoresPerSocket', 'CurrentWatts', 'ExtSensorsJoules', 'ExtSensorsTemp', 'ExtSensorsWatts',
    'FreeMem', 'Gres', 'GresDrain', 'GresUsed', 'LastBusyTime', 'MCS_label', 'NodeAddr',
    'NodeHostName', 'NodeName', 'OS', 'Owner', 'Partitions', 'Port', 'RealMemory', 'Reason',
    'ResumeAfterTime', 'SlurmdStartTime', 'Sockets', 'State', 'ThreadsPerCore', 'TmpDisk',
    'Version', 'Weight',
})

JOB_JSON = frozenset({
    'account', 'accrue_time', 'admin_comment', 'allocating_node', 'array_job_id',
    'array_max_tasks', 'array_task_id', 'array_task_string', 'association_id', 'batch_features',
    'batch_flag', 'batch_host', 'billable_tres', 'burst_buffer', 'burst_buffer_state',
    'cluster', 'cluster_features', 'command', 'comment', 'container', 'container_id',
    'contiguous', 'core_spec', 'cores_per_socket', 'cpu_frequency_governor',
    'cpu_frequency_maximum', 'cpu_frequency_minimum', 'cpus', 'cpus_per_task', 'cpus_per_tres',
    'cron', 'current_working_directory', 'deadline', 'delay_boot', 'dependency',
    'derived_exit_code', 'eligible_time', 'end_time', 'excluded_nodes', 'exclusive',
    'exit_code', 'extra', 'failed_node', 'features', 'federation_origin',
    'federation_siblings_active', 'federation_siblings_viable', 'flags', 'gres_detail',
    'group_id', 'group_name', 'het_job_id', 'het_job_id_set', 'het_job_offset', 'hold',
    'job_id', 'job_resources', 'job_size_str', 'job_state', 'last_sched_evaluation', 'licenses',
    'mail_type', 'mail_user', 'max_cpus', 'max_nodes', 'maximum_switch_wait_time', 'mcs_label',
    'memory_per_cpu', 'memory_per_node', 'memory_per_tres', 'minimum_cpus_per_node',
    'minimum_switches', 'minimum_tmp_disk_per_node', 'name', 'network', 'nice', 'node_count',
    'nodes', 'oversubscribe', 'partition', 'power', 'pre_sus_time', 'preempt_time',
    'preemptable_time', 'prefer', 'priority', 'priority_by_partition', 'profile', 'qos',
    'reboot', 'requeue', 'required_nodes', 'required_switches', 'resize_time', 'restart_cnt',
    'resv_name', 'scheduled_nodes', 'selinux_context', 'shared', 'show_flags',
    'sockets_per_board', 'sockets_per_node', 'standard_error', 'standard_input',
    'standard_output', 'start_time', 'state_description', 'state_reason', 'submit_time',
    'suspend_time', 'system_comment', 'tasks', 'tasks_per_board', 'tasks_per_core',
    'tasks_per_node', 'tasks_per_socket', 'tasks_per_tres', 'thread_spec', 'threads_per_core',
    'time_limit', 'time_minimum', 'tres_alloc_str', 'tres_bind', 'tres_freq', 'tres_per_job',
    'tres_per_node', 'tres_per_socket', 'tres_per_task', 'tres_req_str', 'user_id', 'user_name',
    'wckey',
})

NODE_JSON = frozenset({
    'active_features', 'address', 'alloc_cpus', 'alloc_idle_cpus', 'alloc_memory',
    'architecture', 'boards', 'boot_time', 'burstbuffer_network_address', 'cluster_name',
    'comment', 'cores', 'cpu_binding', 'cpu_load', 'cpus', 'effective_cpus', 'energy',
    'external_sensors', 'extra', 'features', 'free_mem', 'free_memory', 'gpu_spec', 'gres',
    'gres_drained', 'gres_used', 'hostname', 'idle_cpus', 'instance_id', 'instance_type',
    'last_busy', 'mcs_label', 'name', 'next_state_after_reboot',
    'next_state_after_reboot_flags', 'operating_system', 'owner', 'partitions', 'port', 'power',
    'real_memory', 'reason', 'reason_changed_at', 'reason_set_by_user', 'res_cores_per_gpu',
    'reservation', 'resume_after', 'slurmd_start_time', 'slurmd_version', 'sockets',
    'specialized_cores', 'specialized_cpus', 'specialized_memory', 'state', 'state_flags',
    'temporary_disk', 'threads', 'tres', 'tres_used', 'tres_weighted', 'version', 'weight',
})

ACCT_JSON = frozenset({
    'account', 'allocation_nodes', 'array', 'association', 'block', 'cluster', 'comment',
    'constraints', 'container', 'derived_exit_code', 'exit_code', 'extra', 'failed_node',
    'flags', 'group', 'het', 'hold', 'job_id', 'kill_request_user', 'licenses', 'mcs', 'name',
    'nodes', 'partition', 'priority', 'qos', 'qosreq', 'required', 'reservation', 'restart_cnt',
    'script', 'state', 'stderr', 'stderr_expanded', 'stdin', 'stdin_expanded', 'stdout',
    'stdout_expanded', 'steps', 'submit_line', 'time', 'tres', 'used_gres', 'user', 'wckey',
    'working_directory',
})

ACCT_JSON_TIME = frozenset({
    'elapsed', 'eligible', 'end', 'limit', 'planned', 'start', 'submission', 'suspended',
    'system', 'total', 'user',
})

ACCT_JSON_STATE = frozenset({
    'current', 'reason',
})

ACCT_JSON_TRES = frozenset({
    'allocated', 'requested',
})

ACCT_JSON_COMMENT = frozenset({
    'administrator', 'job', 'system',
})

SACCT_COLUMNS = frozenset({
    'Account', 'AdminComment', 'AllocCPUS', 'AllocNodes', 'AllocTRES', 'AssocID', 'AveCPU',
    'AveCPUFreq', 'AveDiskRead', 'AveDiskWrite', 'AvePages', 'AveRSS', 'AveVMSize', 'BlockID',
    'CPUTime', 'CPUTimeRAW', 'Cluster', 'Comment', 'Constraints', 'ConsumedEnergy',
    'ConsumedEnergyRaw', 'Container', 'DBIndex', 'DerivedExitCode', 'Elapsed', 'ElapsedRaw',
    'Eligible', 'End', 'ExitCode', 'Extra', 'FailedNode', 'Flags', 'GID', 'Group', 'JobID',
    'JobIDRaw', 'JobName', 'Layout', 'Licenses', 'MaxDiskRead', 'MaxDiskReadNode',
    'MaxDiskReadTask', 'MaxDiskWrite', 'MaxDiskWriteNode', 'MaxDiskWriteTask', 'MaxPages',
    'MaxPagesNode', 'MaxPagesTask', 'MaxRSS', 'MaxRSSNode', 'MaxRSSTask', 'MaxVMSize',
    'MaxVMSizeNode', 'MaxVMSizeTask', 'McsLabel', 'MinCPU', 'MinCPUNode', 'MinCPUTask', 'NCPUS',
    'NNodes', 'NTasks', 'NodeList', 'Partition', 'Planned', 'PlannedCPU', 'PlannedCPURAW',
    'Priority', 'QOS', 'QOSRAW', 'QOSREQ', 'Reason', 'ReqCPUFreq', 'ReqCPUFreqGov',
    'ReqCPUFreqMax', 'ReqCPUFreqMin', 'ReqCPUS', 'ReqMem', 'ReqNodes', 'ReqTRES', 'Reservation',
    'ReservationId', 'Reserved', 'Restarts', 'ResvCPU', 'ResvCPURAW', 'SLUID', 'Start', 'State',
    'StdErr', 'StdIn', 'StdOut', 'Submit', 'SubmitLine', 'Suspended', 'SystemCPU',
    'SystemComment', 'TRESUsageInAve', 'TRESUsageInMax', 'TRESUsageInMaxNode',
    'TRESUsageInMaxTask', 'TRESUsageInMin', 'TRESUsageInMinNode', 'TRESUsageInMinTask',
    'TRESUsageInTot', 'TRESUsageOutAve', 'TRESUsageOutMax', 'TRESUsageOutMaxNode',
    'TRESUsageOutMaxTask', 'TRESUsageOutMin', 'TRESUsageOutMinNode', 'TRESUsageOutMinTask',
    'TRESUsageOutTot', 'Timelimit', 'TimelimitRaw', 'TotalCPU', 'UID', 'User', 'UserCPU',
    'WCKey', 'WCKeyID', 'WorkDir',
})
