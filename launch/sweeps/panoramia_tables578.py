"""PANORAMIA's DP image tables (Kazmi et al., Table 5, App. C.6's Tables 7, 8; docs/panoramia.md):
DP-SGD ResNet-18 at epsilon 1, 2, 4, 6, 10, 15, 20 and inf (Table 7; Table 5 is its rows 1, 2,
10, 15, inf) and DP-SGD WRN-16-4 at 1, 2, 10, 15, 20 and inf (Table 8), on CIFAR-10 at the
paper's sizes: |D_G| = 10,000 generator images, 4,500 classifier training examples (2,250
members), an audit set of 10,000; the helper has the target's architecture (App. B.1). One job
per architecture: its targets share the audit setup (generator, helpers, baselines), as the
paper's rows share one c_lb. 10,000 O(1) candidates give O(1) RM;RN and PANORAMIA RM;RN.

Runtime: not measured (no accelerator here). Each job trains a helper and its 6 or 8 DP-SGD
targets with per-example gradients, --dp_epochs=30 over the ~45,000 training images at an
expected batch of 256 (about 5,300 steps each), and a conditional VAE on 10,000 images: hours
per job on one accelerator, far beyond a CPU. Needs a prepared tfds copy of CIFAR-10
(--data_dir). The paper tuned learning rate, epochs, batch size and clipping norm per target
for train accuracy without reporting them (App. C.6); one schedule serves every target here,
and its StyleGAN2 is replaced by the conditional VAE (docs/panoramia.md, "Deviations").
"""

from launch.sweep import Sweep, zip_

RESNET18_EPSILONS = "dp1,dp2,dp4,dp6,dp10,dp15,dp20,dpinf"
WRN16_4_EPSILONS = "dp1,dp2,dp10,dp15,dp20,dpinf"

SWEEP = Sweep(
    name="panoramia_tables578",
    module="experiments.panoramia",
    description="PANORAMIA Tables 5/7/8: DP ResNet-18 and WRN-16-4 on CIFAR-10, paper sizes",
    fixed={"modality": "image", "dataset": "cifar10", "num_generator_train": 10000,
           "num_classifier_train": 2250, "num_audit": 10000, "num_helper_train": 10000,
           "num_canaries": 10000, "dp_epochs": 30, "target_batch_size": 256,
           "dp_delta": 1e-5},
    grid=zip_(target_model=["resnet18", "wrn16_4"], helper_model=["resnet18", "wrn16_4"],
              target=[RESNET18_EPSILONS, WRN16_4_EPSILONS]),
)
