"""An adversarial term for train.py (--adv-weight): a small critic that tells a real next
chunk from the model's one-step prediction of it, given the chunk before.

Why: with a mean-squared-error loss, a displacement the model is unsure of comes out as the
mean over the places the object could be, a blurred object, and the next sampling step with
CFG grows that blur into one large object (EXPERIMENTS.md, "Training the warm start"). A critic
that sees (previous chunk, next chunk) pairs penalises blur and a wrong continuation alike,
so the prediction is pushed towards one sharp object at one plausible place instead.

The critic is training-only: it is never exported and the engine never runs it.
"""
import torch
from torch import nn
from torch.nn.utils import spectral_norm


def downsampler(c_in, width):
    """The critics' shared trunk: res x res x c_in -> (res / 4)^2 x 2 width, spectral norm on every conv."""
    return [spectral_norm(nn.Conv2d(c_in, width, 3, padding=1)), nn.LeakyReLU(0.2),
            spectral_norm(nn.Conv2d(width, 2 * width, 4, stride=2, padding=1)), nn.LeakyReLU(0.2),
            spectral_norm(nn.Conv2d(2 * width, 2 * width, 4, stride=2, padding=1)), nn.LeakyReLU(0.2)]


class PairCritic(nn.Module):
    """PatchGAN-style critic over [previous chunk, chunk] stacked on channels
    (2 * block_frames RGB frames), res x res -> a (res / 4) x (res / 4) grid of logits.
    Spectral norm on every conv keeps it Lipschitz (stable hinge training, no extra penalty)."""

    def __init__(self, block_frames, width=48, gain=1.0):
        super().__init__()
        # spectral norm bounds every layer's gain by 1, which at 32 x 32 leaves logits far inside the hinge's
        # margin of 1 (a blurred edge moves them by ~0.1): the gain scales them to where the margin means something
        self.gain = gain
        c_in = 3 * 2 * block_frames
        self.net = nn.Sequential(*downsampler(c_in, width), spectral_norm(nn.Conv2d(2 * width, 1, 3, padding=1)))

    def forward(self, prev, cur):
        """prev, cur [N, 3, block_frames, H, W] -> logits [N, 1, H/4, W/4]."""
        n = prev.shape[0]
        return self.gain * self.net(torch.cat([prev.reshape(n, -1, *prev.shape[3:]), cur.reshape(n, -1, *cur.shape[3:])], 1))


def select_chunks(x, block_frames, sel, previous=False):
    """x [B, 3, F, H, W], sel [B, chunks] bool (never chunk 0) -> the selected chunks (or, with
    previous, the chunk before each), [N, 3, block_frames, H, W]."""
    B, C, F, H, W = x.shape
    ch = x.reshape(B, C, F // block_frames, block_frames, H, W).permute(0, 2, 1, 3, 4, 5)  # [B, nc, C, bf, H, W]
    if previous:
        ch = torch.cat([ch[:, :1], ch[:, :-1]], dim=1)
    return ch[sel]


class AnchoredCritic(nn.Module):
    """The self-forcing critic (self_forcing.py): [anchor, previous chunk, chunk] stacked on channels,
    where the anchor is the last real chunk before a rollout of the model's own blocks. Two outputs:
    a PatchGAN grid (res / 4)^2 as PairCritic's, and one global logit from mean-pooled features, so that
    what is judged can be frame-wide: how many objects there are and how large, against the anchor's."""

    def __init__(self, block_frames, width=48, gain=1.0):
        super().__init__()
        self.gain = gain
        c_in = 3 * 3 * block_frames
        self.features = nn.Sequential(*downsampler(c_in, width))
        self.patch = spectral_norm(nn.Conv2d(2 * width, 1, 3, padding=1))
        self.pool = nn.Sequential(spectral_norm(nn.Conv2d(2 * width, 2 * width, 4, stride=2, padding=1)),
                                  nn.LeakyReLU(0.2))
        self.glob = spectral_norm(nn.Linear(2 * width, 1))

    def forward(self, anchor, prev, cur):
        """anchor, prev, cur [N, 3, block_frames, H, W] -> (patch logits [N, 1, H/4, W/4], global [N, 1])."""
        n = cur.shape[0]
        h = self.features(torch.cat([u.reshape(n, -1, *u.shape[3:]) for u in (anchor, prev, cur)], 1))
        return self.gain * self.patch(h), self.gain * self.glob(self.pool(h).mean(dim=(2, 3)))


def _outputs(critic, inputs):
    out = critic(*inputs)
    return out if isinstance(out, tuple) else (out,)


def critic_loss(critic, real_inputs, fake_inputs):
    """Hinge loss of the critic, summed over its outputs; the caller detaches the fake inputs."""
    return (sum(torch.relu(1 - o).mean() for o in _outputs(critic, real_inputs))
            + sum(torch.relu(1 + o).mean() for o in _outputs(critic, fake_inputs)))


def generator_loss(critic, fake_inputs):
    return -sum(o.mean() for o in _outputs(critic, fake_inputs))
