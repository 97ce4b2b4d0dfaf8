# language: zh-CN
@network @switch_uplink @slo_15m
功能: 训练作业在叶交换机丢失一条上行链路后恢复
  通过 SSH 关闭承载多节点微调作业的叶交换机的一条上行链路。该链路必须承载过作业的流量（交换机计数器为证；
  空闲的链路什么也证明不了，演练结论不确定）。在演练期间及之后的稳定窗口内，NCCL 必须保持 RDMA（绝不回退到
  NET/Socket，那会让多节点训练悄悄变得比单节点还慢），作业必须经叶交换机的其他上行链路绕行——或在 NCCL
  超时杀死它后从最新检查点重启——训练吞吐必须在 15 分钟内回到基线的 90 % 并保持（DESIGN §1）；整个稳定窗口内
  loss 保持有限，没有 worker 容器失败或重启，也没有演练读不懂的错误日志行未被解释。平台自己的监控必须在一分钟内
  告诉值班人员一条承载流量的链路断了（FabricLinkDown，来自交换机的 SNMP 接口表），并在演练恢复该链路后解除。

  场景: 关闭承载微调作业的叶交换机的一条上行链路
    假如训练作业至少在 2 个节点上以稳定的吞吐运行
    当通过 SSH 关闭承载该作业的叶交换机的一条上行链路
    那么该上行链路在关闭前一直承载着作业的流量
    而且 NCCL 保持 RDMA，从不回退到 Socket
    而且作业绕开故障上行链路，或从最新的检查点重启
    而且吞吐在 15 分钟内恢复
    而且吞吐恢复到基线的至少 90 %
    而且作业在整个稳定窗口内保持健康：loss 有限，没有失败的 worker 容器，没有无法解释的错误日志行
    而且监控在 1 分钟内发出 FabricLinkDown 告警
    当重新开启被关闭的上行链路
    那么恢复后该告警解除
    而且监控发出的不同告警数不超过其预算

  场景大纲: 通过 SSH <transport> 会话关闭 <dialect> 叶交换机的一条上行链路
    假如交换机清单中有一台 <dialect> 叶交换机
    而且训练作业至少在 2 个节点上以稳定的吞吐运行
    当通过 SSH <transport> 会话关闭承载该作业的 <dialect> 叶交换机的一条上行链路
    那么该上行链路在关闭前一直承载着作业的流量
    而且 NCCL 保持 RDMA，从不回退到 Socket
    而且作业绕开故障上行链路，或从最新的检查点重启
    而且吞吐在 15 分钟内恢复
    而且吞吐恢复到基线的至少 90 %
    而且作业在整个稳定窗口内保持健康：loss 有限，没有失败的 worker 容器，没有无法解释的错误日志行
    而且监控在 1 分钟内发出 FabricLinkDown 告警
    当重新开启被关闭的上行链路
    那么恢复后该告警解除
    而且监控发出的不同告警数不超过其预算

    # 每种交换机操作系统一组，以其标签标记（`-m eos`）。清单中没有交换机使用该操作系统的例子会被跳过并
    # 说明原因；孪生体的 `fabric-dialects` 配置在作业下每种各有一台叶交换机。
    @sonic
    例子: SONiC
      | dialect | transport |
      | sonic   | exec      |
      | sonic   | shell     |

    @nxos
    例子: NX-OS
      | dialect | transport |
      | nxos    | shell     |
      | nxos    | exec      |

    @eos
    例子: EOS
      | dialect | transport |
      | eos     | shell     |
      | eos     | exec      |

    @cumulus
    例子: Cumulus NVUE
      | dialect | transport |
      | cumulus | shell     |
      | cumulus | exec      |

    @onyx
    例子: Onyx
      | dialect | transport |
      | onyx    | shell     |
