# language: zh-CN
@training @gpu_node_loss @slo_15m
功能: 训练作业在丢失一个 GPU 节点后恢复
  正在微调的训练作业丢失了它所在的一个 GPU 节点。Volcano 作业必须被重新调度到其他节点，从它保存的最新
  检查点恢复，最多丢失一个检查点间隔的进度（且检查点足够频繁，一个间隔在预算之内），以往常的吞吐继续
  通过 RDMA 训练而不再重启，并在 15 分钟内回到故障前已达到的步数（DESIGN §1；MegaScale：≤ 15 分钟回到
  故障前的进度）。仅仅在走步是不够的：在整个稳定窗口内 loss 必须保持有限（仍在学习），按 Pod 自身的状态
  没有 worker 容器失败或重启（无论日志怎么说），也没有演练读不懂的错误日志行未被解释。

  场景大纲: 以 <fault> 方式丢失微调作业的一个 GPU 节点
    假如训练作业至少在 2 个节点上运行
    而且它已保存过一个检查点
    当运行该作业的一个 GPU 节点以 <fault> 方式丢失
    那么作业离开丢失的节点并被重新调度
    而且它从最新的检查点恢复
    而且丢失的训练步数不超过 2000 步
    而且重启后 NCCL 仍通过 RDMA 通信
    而且其训练吞吐不低于基线的 90 %
    而且训练在 15 分钟内恢复
    而且作业恢复后保持健康：loss 有限，没有失败的 worker 容器，没有无法解释的错误日志行
    而且监控在 1 分钟内发出 TrainingNodeLost 告警
    而且恢复后该告警解除
    而且监控发出的不同告警数不超过其预算

    # 每种丢失节点的方式一组，以其标签标记（`-m cordon_drain`）。站点不运行的方式——不在其
    # faults.node_modes 中，或真实集群的配置没有说明其 DCGM 在哪里运行、由谁排空节点（faults.gpu_fault）时的
    # gpu-unhealthy——会被跳过并说明原因。gpu-unhealthy 即种子方案的演练 1：在节点的 DCGM Pod 中用 DCGM 的
    # `dcgmi test --inject` 注入一个 XID；导出器必须上报它，GPU 必须被标为不健康，节点必须被排空（由站点或由
    # 演练执行），之后才评判作业的恢复。
    @cordon_drain
    例子: 封锁并排空
      | fault           |
      | cordon-drain    |

    @taint_noexecute
    例子: NoExecute 污点
      | fault           |
      | taint-noexecute |

    @gpu_unhealthy
    例子: GPU 不健康（DCGM 上报的 XID）
      | fault           |
      | gpu-unhealthy   |
