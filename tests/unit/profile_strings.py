"""Every string a profile can carry that reaches a command line, a job file, an object's name or label, a path or
another program (issue 32), with a value that would start another line or option and one of another kind's shape;
and numeric values outside their documented ranges. Shared by tests/unit/test_profile_strings.py (all of them, at
profile load) and tests/e2e/test_bad_input_commands.py (a sample through the CLI)."""

from __future__ import annotations

from pathlib import Path

import yaml
from drills.core.datafiles import load_text as load_yaml  # libyaml: these are read at collection, by every worker

BUILTIN = (Path(__file__).resolve().parents[2] / "drills" / "profile" / "twin.yaml").read_text()
EVIL = "ok\nexec_prerun=touch /tmp/pwned"  # a second line for fio's job file, a second command for a shell


def with_value(path: str, value) -> str:
    """The built-in twin profile with one value set (`a.b.c`), as YAML."""
    data = load_yaml(BUILTIN)
    *parents, leaf = path.split(".")
    node = data
    for part in parents:
        node = node.setdefault(part, {})
    node[leaf] = value
    return yaml.safe_dump(data)


# field path → a value of another kind's shape that must be refused too (besides EVIL)
INJECTIONS = {
    "name": None,
    "fabric.lldp_reason": None,  # Text: one printable line, shown in reports and records, never sent to a switch
    "cluster.context": "prod; kubectl delete ns ai-platform",
    "cluster.kubeconfig": None,
    "cluster.twin.profile": "../../etc/passwd",
    "workloads.training.job": "llm-finetune-8b --all",
    "workloads.training.namespace": "ai-platform,kube-system",
    "workloads.training.container": "trainer;id",
    "workloads.inference.deployment": "llama 7b",
    "workloads.inference.namespace": "../kube-system",
    "workloads.inference.service": "llama.7b",
    "workloads.inference.model": None,
    "workloads.inference.label_selector": "app=llama;reboot",
    "workloads.inference.replica_header": "X-Replica: 1",
    "workloads.inference.endpoint": "http://gw:8000/v1\r\nHost: evil",
    "workloads.inference.load_generator.image": "registry.example.com/gpu-drills:0.1.0 --privileged",
    "workloads.inference.load_generator.namespace": "AI",
    "workloads.inference.load_generator.service_account": "default;admin",
    "workloads.inference.load_generator.priority_class_name": "high priority",
    "storage.checkpoint_store": "/ckpt:/etc",
    "workloads.training.checkpoint_store.dir": "/ckpt\n; cat /etc/shadow",
    "workloads.training.checkpoint_store.path": "ckpt\x00",
    "workloads.training.checkpoint_store.image": "registry.example.com/busybox:latest",
    "storage.saturation.block_size": "1M;rm",
    "storage.saturation.size": "1G --exec_prerun=x",
    "storage.saturation.namespace": "default ",
    "storage.saturation.claim": "ckpt/../x",
    "storage.saturation.mount_path": "/store/$(reboot)",
    "storage.saturation.image": "registry.example.com/fio:latest",
    "storage.saturation.priority_class_name": "-high",
    "faults.node": "gpu-train-01 gpu-train-02",
    "faults.switch": "leaf-1;reboot",
    "faults.uplink": "Ethernet0 && shutdown",
    "faults.leaf_label": "network.gpu-drills.io/leaf=x",
    "faults.gpu_fault.dcgm_namespace": "gpu-operator; dcgmi test --inject",
    "faults.gpu_fault.dcgm_selector": "app=nvidia-dcgm;rm -rf /",
    "faults.gpu_fault.dcgm_container": "nvidia-dcgm-ctr --gpuid 0",
    "faults.gpu_fault.exporter_namespace": "gpu operator",
    "faults.gpu_fault.exporter_selector": "app=$(id)",
    "safety.lock_namespace": "ai_platform",
    "acceptance.namespace": "ai-platform\nkube-system",
    "acceptance.reference_node": "gpu-train-01,gpu-train-02",
    "acceptance.store_dir": "relative/dir",
    "acceptance.leaf_port_annotation": "a b",
    "acceptance.twin_profile": "../minimal",
    "acceptance.thresholds.driver_version": None,  # text compared with a tool's output, never sent: one line only
    "acceptance.thresholds.cuda_version": None,
    "acceptance.thresholds.link_layer": None,
    "acceptance.thresholds.port_speed": None,
    "acceptance.server": None,  # a catalogue key (drills/acceptance/catalogue.yaml), looked up, never sent
    "acceptance.product": None,
    "storage.saturation.resources.cpu": "1; rm",
    "storage.saturation.resources.cpu_limit": "2 cores",
    "storage.saturation.resources.memory": "1Gi\n",
    "storage.saturation.resources.memory_limit": "-1Gi",
    "workloads.inference.load_generator.resources.cpu": "500m,1",
    "workloads.inference.load_generator.resources.cpu_limit": "$(id)",
    "workloads.inference.load_generator.resources.memory": "512 Mi",
    "workloads.inference.load_generator.resources.memory_limit": "1Gi;",
    "monitoring.prometheus": "http://prometheus:9090/api?query=$(id)",  # read by the drills: a URL, never more
    "monitoring.alertmanager": "http://admin:secret@alertmanager:9093",
}


NUMBERS = [  # (field path, case, value): every numeric profile value has a documented range; .inf/.nan never are
    (path, tag, value) for path, tag, value in (
        ("slo.training_recovery_s", "inf", float("inf")), ("slo.training_recovery_s", "inf-text", "inf"),
        ("slo.inference_recovery_s", "nan", float("nan")), ("slo.network_recovery_s", "a-year", "8760h"),
        ("slo.inference_error_budget", "above-1", 1.5), ("slo.p99_latency_factor", "inf", float("inf")),
        ("storage.probe_size_mb", "huge", 10**12), ("storage.probe_shards", "zero", 0),
        ("storage.saturation.numjobs", "huge", 100000), ("storage.saturation.iodepth", "inf", float("inf")),
        ("storage.saturation.runtime_s", "inf", ".inf"), ("storage.bandwidth_target_mb_s", "nan", float("nan")),
        ("faults.pods_to_kill", "huge", 10**9), ("faults.eviction_timeout_s", "negative", -1),
        ("safety.lock_duration_s", "zero", 0), ("safety.lock_duration_s", "a-day", 86400),
        ("safety.blast_radius.max_nodes", "huge", 10**7), ("cluster.twin.scale", "inf", float("inf")),
        ("workloads.inference.load.users", "huge", 10**9), ("workloads.inference.load.spawn_rate", "inf", float("inf")),
        ("workloads.training.checkpoint_interval_steps", "zero", 0),
        ("acceptance.thresholds.gemm_gflops_min", "inf", float("inf")), ("acceptance.thresholds.max_temp_c", "hot", 500),
        ("acceptance.thresholds.port_mtu", "tiny", 10), ("acceptance.max_nodes", "huge", 100000),
        ("monitoring.alert_budget", "zero", 0), ("monitoring.scrape_interval", "inf", ".inf"),
    )
]
