// Issue 34, label gpu_emulated: OptimizeOnDevice(DeviceGradientModel) with the model on the device (the training options'
// device_batches) on the CUDA stand-in: the model gets device views of the optimizer's memory and moves them as a CUDA
// library would (the stand-in's cudaMemcpy, GpuEmulatedTests.cs's Cuda); its training equals the same training with host
// copies, its views expire with the call, and what cannot work is refused.
using System;
using System.Collections.Generic;
using System.Linq;
using Shardopt.DistributedTraining;

static partial class ShardoptTests
{
    static void DeviceBatchesTrainAsHostCopies()
    {
        if (!StandinOrSkip(nameof(DeviceBatchesTrainAsHostCopies))) return;
        var data = new OptimizationInputData { NumSamples = 32, NumValidationSamples = 8 };
        using (var b = new StagedCommunicationBackend<float>(0, 1))
        {
            OptimizationResult<float> want, got;
            using (var hostCopies = DevAdam(DevConfig(b)))
            {
                hostCopies.Initialize(DevLayout(), DevInitial);
                want = hostCopies.Optimize(DevModel, data);
            }
            var kept = new List<NativeView<float>>();
            int calls = 0, lossOnly = 0;
            using (var onDevice = DevAdam(DevConfig(b)))
            {
                onDevice.Initialize(DevLayout(), DevInitial);
                got = onDevice.OptimizeOnDevice((NativeView<float> p, NativeView<float> g, ReadOnlySpan<long> samples, Dataset set) =>
                {
                    ++calls;
                    Assert(p.IsDevice && p.Length == 8 && p.DeviceId == b.DeviceId && (g == null || g.IsDevice), "device views of the optimizer's memory");
                    var grad = new float[8];
                    double loss = DevModel(Cuda.Read(p.DevicePointer, 8), grad, samples, set);
                    if (g != null) Cuda.Write(g.DevicePointer, grad); else ++lossOnly;
                    kept.Add(p);
                    return loss;
                }, data);
                Assert(calls > 0 && lossOnly > 0, "training and loss-only calls");
                Throws<ObjectDisposedException>(() => { var _ = kept[0].DevicePointer; }); // a view kept past its call
            }
            Assert(got.BestSolution.SequenceEqual(want.BestSolution), "the best solution equals the host-copy run's, bit for bit");
            Assert(got.ValidationLossHistory.SequenceEqual(want.ValidationLossHistory) && got.Steps == want.Steps, "the same histories");
            Assert(got.ValidationLossHistory.Last() < got.ValidationLossHistory.First(), "it trained");
        }
    }

    static void DeviceBatchesRefusals()
    {
        if (!StandinOrSkip(nameof(DeviceBatchesRefusals))) return;
        var data = new OptimizationInputData { NumSamples = 8 };
        DeviceGradientModel<float> model = (p, g, s, set) => 0;
        using (var b = new StagedCommunicationBackend<float>(0, 1))
        {
            using (var onHost = DevAdam(DevConfig(b, MemorySpace.Host)))
            {
                onHost.Initialize(DevLayout(), DevInitial);
                var e = Throws<ShardoptArgumentException>(() => onHost.OptimizeOnDevice(model, data));
                Assert(e.Message.Contains("device_batches needs an optimizer in cuda memory"), e.Message);
            }
            using (var onDevice = DevAdam(DevConfig(b)))
            {
                onDevice.Initialize(DevLayout(), DevInitial);
                onDevice.GetOptions().DeviceBatches = true;
                var e = Throws<InvalidOperationException>(() => onDevice.Optimize(DevModel, data)); // spans of host memory
                Assert(e.Message.Contains("OptimizeOnDevice"), e.Message);
            }
        }
    }
}
