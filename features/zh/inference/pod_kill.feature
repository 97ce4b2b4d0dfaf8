# language: zh-CN
@inference @inference_pod_kill @slo_5m
功能: 推理服务在丢失服务副本后恢复
  在用户发送补全请求时强制终止 vLLM 推理 Deployment 的副本。ReplicaSet 必须拉起新的 Pod，调度成功并就绪，
  端点必须在 5 分钟内恢复服务；只要还有副本在服务，用户几乎看不到错误，p99 延迟不超过平时的两倍：幸存的
  副本扛住负载（DESIGN §1；种子方案的推理演练）。为维护而排空节点是自愿中断：Deployment 的
  PodDisruptionBudget 必须控制驱逐的节奏，始终有副本在服务，用户完全感受不到中断；被封锁节点上的副本必须
  在别处找到 GPU，集群满载时抢占低优先级的工作。平台自己的监控必须在一分钟内告诉值班人员——丢了副本但仍有
  副本在服务时发警告（InferenceReplicasUnavailable），一个不剩时立即呼叫（InferenceUnavailable）——并在副本
  恢复后解除。

  场景大纲: 推理 Deployment 在负载下失去<killed>
    假如推理服务 Deployment 的全部副本均已就绪
    而且 4 个用户正在向其端点发送补全请求
    当强制终止<killed>
    那么端点在 5 分钟内恢复服务
    而且每个失败的请求都是如实的 HTTP 错误：没有带错误内容的 200，没有挂起的请求
    而且被终止的 Pod 被新 Pod 取代，新 Pod 已就绪、已加入 Service 并在提供服务
    而且 Deployment 恢复到期望的就绪副本数
    而且有副本提供服务期间，失败的请求不超过 1%
    而且有副本提供服务期间，p99 延迟不超过基线的 2 倍
    而且监控在 1 分钟内发出 <alert> 告警
    而且恢复后该告警解除
    而且监控发出的不同告警数不超过其预算

    # 按规模标记（`-m kill_one`）。超过站点 faults.inference.max_kill 的规模会被跳过并说明原因：
    # 终止全部副本就是一次完全中断，由站点决定。告警是值班人员该收到的：丢了副本但仍有副本在服务是警告
    # （再丢一个就是中断）；一个副本都不剩则立即呼叫。
    @kill_one
    例子: 一个副本
      | killed         | alert                        |
      | 2个副本中的1个 | InferenceReplicasUnavailable |

    @kill_all
    例子: 全部副本
      | killed   | alert                |
      | 全部副本 | InferenceUnavailable |

  场景: 像节点排空那样在负载下驱逐全部副本
    假如推理服务 Deployment 的全部副本均已就绪
    而且 4 个用户正在向其端点发送补全请求
    当像节点排空那样逐个驱逐其副本
    那么端点在 5 分钟内恢复服务
    而且节点排空期间，失败的请求不超过 1%
    而且被终止的 Pod 被新 Pod 取代，新 Pod 已就绪、已加入 Service 并在提供服务
    而且 Deployment 恢复到期望的就绪副本数

  场景: 在负载下封锁并排空承载副本的 GPU 节点
    假如推理服务 Deployment 的全部副本均已就绪
    而且 4 个用户正在向其端点发送补全请求
    当承载其多数副本的 GPU 节点被封锁并排空
    那么端点在 5 分钟内恢复服务
    而且节点排空期间，失败的请求不超过 1%
    而且被终止的 Pod 被新 Pod 取代，新 Pod 已就绪、已加入 Service 并在提供服务
    而且 Deployment 恢复到期望的就绪副本数
