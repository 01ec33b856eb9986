"""The loss weights that training and the evaluations share (train.py, gpu_train.py, context.py)."""
import torch


def object_weights(cover, weight, dilate):
    """The objects' pixel coverage (numpy [B, F, H, W], data.make_batch(coverage=True)) -> per-pixel loss
    weights [B, 1, F, H, W] = 1 + weight x the coverage dilated by `dilate` pixels. Objects are 2-9% of the
    pixels; the dilation keeps an uncertain edge from being pulled towards the object's colour (RECIPE.md,
    "Training": object-weighted loss)."""
    near = torch.nn.functional.max_pool2d(torch.from_numpy(cover), 2 * dilate + 1, stride=1, padding=dilate)
    return 1 + weight * near[:, None]
