# language: zh-CN
@inference @inference_rolling_restart @slo_10m
功能: 推理服务在负载下经受滚动重启
  定期滚动重启推理服务是常规操作（换新镜像、改配置、控制内存泄漏；种子方案 §5.3），所以用户不应察觉。
  `kubectl rollout restart` 在用户发送补全请求时替换 vLLM Deployment 的每个副本：旧 Pod 只能在新 Pod 开始服务
  之后才下线，每个 Pod 停止前必须处理完手上的请求，滚动重启必须完成。每个副本都被替换（按 Pod uid 判定），
  没有请求失败，p99 延迟不超过平时的两倍。健康平台上的计划内重启不应惊动任何人：推理告警保持安静——只有监控确实在
  看（规则在其抓取的序列上求值）时这才算数，否则演练结论不确定。

  场景: 在负载下重启推理 Deployment 的全部副本
    假如推理服务 Deployment 的全部副本均已就绪
    而且 4 个用户正在向其端点发送补全请求
    当像 `kubectl rollout restart` 那样滚动重启 Deployment
    那么滚动重启在 10 分钟内完成
    而且每个副本都被新 Pod 取代，新 Pod 已就绪、已加入 Service 并在提供服务
    而且滚动重启期间任何时刻不可用的副本都不超过 0 个
    而且监控不发出 InferenceUnavailable、InferenceReplicasUnavailable、InferenceLatencyBurn 或 InferenceServingNothing 中的任何告警
    而且监控发出的不同告警数不超过其预算
    而且滚动重启期间，失败的请求不超过 0%
    而且滚动重启期间，p99 延迟不超过基线的 2 倍
