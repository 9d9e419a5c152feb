"""The reference side of fusionflow.check: one sample's plan (the dict of
Loader.plan) replayed through torchvision's functional ops, or timm's
Pillow path, on the image as Pillow decodes it.

The plan gives every random draw (crop box, flip, op, magnitude, sigma,
weights); the reference library computes the pixels from them. Modes:
  "v1"   torchvision.transforms.functional on uint8 CHW tensors;
  "v2"   torchvision.transforms.v2.functional likewise;
  "timm" timm's path: crops, resizes and flips on the PIL image (Pillow's
         resampling), then ToTensor and Normalize.
The pil_* steps (timm's policies, semantics=pil) run on the PIL image in
every mode, through timm's op functions (timm.data.auto_augment), Pillow's
GaussianBlur and torchvision's adjust_hue. AugMix's mixing follows
torchvision's AugMix.forward (float32 weighted sum, truncated to uint8) and
timm's AugMixAugment._apply_basic (float32 sum, clipped, Image.blend).
"""
import numpy as np
import torch
import torchvision.transforms.autoaugment as tv_autoaugment
import torchvision.transforms.functional as F1
from PIL import Image, ImageFilter
from torchvision.transforms import InterpolationMode


class NoReplay(Exception):
    """A step the reference cannot replay (the message says which and why)."""


_TORCHVISION_NAMES = {"shear_x": "ShearX", "shear_y": "ShearY", "translate_x": "TranslateX",
                      "translate_y": "TranslateY", "rotate": "Rotate"}
_FACTOR = {"brightness": "adjust_brightness", "color": "adjust_saturation", "contrast": "adjust_contrast",
           "sharpness": "adjust_sharpness", "hue": "adjust_hue"}
_INTERPOLATION = {"nearest": InterpolationMode.NEAREST, "bilinear": InterpolationMode.BILINEAR,
                  "bicubic": InterpolationMode.BICUBIC}
_RESAMPLE = {"nearest": Image.NEAREST, "bilinear": Image.BILINEAR, "bicubic": Image.BICUBIC}


def _timm_ops():
    try:
        import timm.data.auto_augment as taa
    except ImportError as e:
        raise NoReplay(f"the pipeline's Pillow ops (pil_*, the timm_* policies, semantics=pil) replay through "
                       f"timm's op functions, and this Python has no timm ({e}): pip install timm") from None
    return taa


class Replay:
    """Replays plans in one mode ("v1", "v2" or "timm")."""

    def __init__(self, mode):
        self.mode = mode
        self.F = F1
        if mode == "v2":
            import torchvision.transforms.v2 as v2
            import torchvision.transforms.v2.functional as F2
            self.F, self._v2 = F2, v2

    # -- the image: a uint8 CHW tensor, or a PIL image (timm mode, pil_* steps) ----------------------
    @staticmethod
    def _pil(img):
        if isinstance(img, Image.Image):
            return img
        return Image.fromarray(img.permute(1, 2, 0).contiguous().numpy(), "RGB")

    def _own(self, img):
        """The mode's own form of img: PIL for timm, a tensor otherwise."""
        if self.mode == "timm":
            return self._pil(img)
        if isinstance(img, Image.Image):
            return torch.from_numpy(np.array(img, dtype=np.uint8)).permute(2, 0, 1).contiguous()
        return img

    @staticmethod
    def to_hwc(img):
        """uint8 (H, W, 3) NumPy array of either form."""
        if isinstance(img, Image.Image):
            return np.array(img.convert("RGB"), dtype=np.uint8)
        return img.permute(1, 2, 0).contiguous().numpy()

    # -- a plan ---------------------------------------------------------------------------------------
    def run(self, image, plan):
        """The plan's steps on image (a PIL RGB image, the whole file) up to the
        float stage; returns (the uint8 result in the mode's form, the erase steps
        left for the float stage)."""
        if "views" in plan:
            raise NoReplay("views (decode || N x OPS) are not checked: check each view's ops as a pipeline "
                           "of its own")
        x, y, w, h = plan["decode"]["region"]
        img = self._own(image.crop((x, y, x + w, y + h)))
        steps = [s for s in plan["steps"] if s.get("applied", True)]
        erases = [s for s in steps if s["op"] == "erase"]
        steps = [s for s in steps if s["op"] != "erase"]
        i = 0
        while i < len(steps):
            s = steps[i]
            if s["op"] == "aug_mix_begin":
                end = next(k for k in range(i, len(steps)) if steps[k]["op"] in ("aug_mix_end", "timm_aug_mix_end"))
                img = self._aug_mix(img, steps[i:end + 1])
                i = end + 1
                continue
            img = self._step(img, s)
            i += 1
        return self._own(img), erases

    def _step(self, img, s):
        op, F = s["op"], self.F
        if op == "crop":
            bx, by, bw, bh = s["box"]
            return F.crop(img, by, bx, bh, bw)
        if op == "resize":
            interpolation = _INTERPOLATION[s.get("interpolation", "bilinear")]
            if isinstance(img, Image.Image):
                return F1.resize(img, list(s["size"]), interpolation=interpolation)
            return F.resize(img, list(s["size"]), interpolation=interpolation, antialias=s["antialias"])
        if op == "horizontal_flip":
            return F.horizontal_flip(img) if self.mode == "v2" else F1.hflip(img)
        if op == "vertical_flip":
            return F.vertical_flip(img) if self.mode == "v2" else F1.vflip(img)
        if op == "gaussian_blur":
            return F.gaussian_blur(img, list(s["kernel_size"]), [s["sigma"], s["sigma"]])
        if op.startswith("pil_"):
            return self._pil_step(self._pil(img), op[4:], s)
        if op in _FACTOR:
            return getattr(F, _FACTOR[op])(img, s["arg"])
        if op == "posterize":
            return F.posterize(img, int(s["arg"]))
        if op == "solarize":
            return F.solarize(img, s["arg"])
        if op in ("autocontrast", "equalize", "invert"):
            return getattr(F, op)(img)
        if op in _TORCHVISION_NAMES:
            return self._warp(img, _TORCHVISION_NAMES[op], s)
        raise NoReplay(f"a plan step {op!r} has no replay in fusionflow.check")

    def _warp(self, img, name, s):
        """shear/translate/rotate as the policies apply them (torchvision's own dispatch)."""
        interpolation = _INTERPOLATION[s["interpolation"]]
        fill = s.get("fill")
        fill = [float(v) for v in fill] if fill and any(fill) else None
        if self.mode == "v2":
            policy = self._v2.RandAugment(interpolation=interpolation, fill=fill)
            return policy._apply_image_or_video_transform(img, name, s["arg"], interpolation, policy._fill)
        return tv_autoaugment._apply_op(img, name, s["arg"], interpolation=interpolation, fill=fill)

    def _pil_step(self, img, op, s):
        if op == "hue":
            return F1.adjust_hue(img, s["arg"])
        if op == "gaussian_blur":
            return img.filter(ImageFilter.GaussianBlur(radius=s["arg"]))
        taa = _timm_ops()
        if op in ("shear_x", "shear_y", "translate_x", "translate_y", "rotate"):
            fn = {"translate_x": taa.translate_x_abs, "translate_y": taa.translate_y_abs}.get(op) or getattr(taa, op)
            return fn(img, s["arg"], fillcolor=tuple(int(v) for v in s["fill"]), resample=_RESAMPLE[s["interpolation"]])
        if op in ("autocontrast", "equalize", "invert"):
            return {"autocontrast": taa.auto_contrast, "equalize": taa.equalize, "invert": taa.invert}[op](img)
        if op == "posterize":
            return taa.posterize(img, int(s["arg"]))
        if op == "solarize_add":
            return taa.solarize_add(img, int(s["arg"]))
        if op in ("solarize", "color", "contrast", "brightness", "sharpness"):
            return getattr(taa, op)(img, s["arg"])
        raise NoReplay(f"a plan step 'pil_{op}' has no replay in fusionflow.check")

    def _aug_mix(self, img, steps):
        """steps: aug_mix_begin, the chains (chain_begin, ops, chain_end), then
        aug_mix_end (torchvision's AugMix) or timm_aug_mix_end (timm's)."""
        chains, k = [], 1
        while steps[k]["op"] == "chain_begin":
            end = next(j for j in range(k, len(steps)) if steps[j]["op"] == "chain_end")
            chains.append((steps[k + 1:end], steps[end]["weight"]))
            k = end + 1
        if steps[-1]["op"] == "timm_aug_mix_end":
            base = self._pil(img)
            mixed = np.zeros_like(np.asarray(base), dtype=np.float32)
            for ops, weight in chains:
                aug = base
                for s in ops:
                    aug = self._step(aug, s)
                mixed += np.float32(weight) * np.asarray(self._pil(aug), dtype=np.float32)
            np.clip(mixed, 0, 255.0, out=mixed)
            return Image.blend(base, Image.fromarray(mixed.astype(np.uint8)), float(np.float32(steps[-1]["weight"])))
        base = self._own(img) if self.mode != "timm" else self._own(self._pil(img))
        tensor = base if isinstance(base, torch.Tensor) else torch.from_numpy(np.array(base)).permute(2, 0, 1)
        mix = torch.tensor(steps[0]["weight"], dtype=torch.float32) * tensor.unsqueeze(0)
        for ops, weight in chains:
            aug = base
            for s in ops:
                aug = self._step(aug, s)
            aug = self._own(aug)
            aug = aug if isinstance(aug, torch.Tensor) else torch.from_numpy(np.array(aug)).permute(2, 0, 1)
            mix.add_(torch.tensor(weight, dtype=torch.float32) * aug.unsqueeze(0))
        return mix[0].to(torch.uint8)

    # -- the float stage ------------------------------------------------------------------------------
    def to_float(self, img, stage, erases):
        """The float32 CHW output: stage is ("normalize", mean, std) or
        ("to_dtype",); then the erase steps. Returns (output, mask of the pixels
        compared: False where an erase drew noise from fusionflow's own stream)."""
        if self.mode == "timm":
            x = F1.to_tensor(self._pil(img))
        elif self.mode == "v2":
            x = self.F.to_dtype(self._own(img), torch.float32, scale=True)
        else:
            x = F1.convert_image_dtype(self._own(img), torch.float32)
        if stage[0] == "normalize":
            x = self.F.normalize(x, list(stage[1]), list(stage[2]))
        mask = np.ones(x.shape[1:], bool)
        for s in erases:
            bx, by, bw, bh = s["box"]
            if "noise_key" in s:
                mask[by:by + bh, bx:bx + bw] = False
                continue
            value = torch.tensor(s["fill"], dtype=torch.float32).view(3, 1, 1)
            x = F1.erase(x, by, bx, bh, bw, value)
        return x.numpy(), mask

