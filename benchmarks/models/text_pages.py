#!/usr/bin/python3
"""Synthetic printed pages for the text detector of the quantized zoo
(add_ppocr_det.py): a light, slightly noisy sheet with lines of "words" made
of glyph-sized dark strokes, normalized as PaddleOCR's detector expects
((x / 255 - mean) / std per RGB channel, ImageNet's mean and std). PP-OCRv4's
detector marks about a sixth of such a page as text, so its quantized output
says something (a page of noise gives an all-zero map).

usage: text_pages.py OUT.npy SEED [SIZE]   (SIZE a multiple of 32, default 640)

Deterministic: the same seed gives the same bytes. Needs python3-numpy."""
import sys

import numpy as np

MEAN = np.array([0.485, 0.456, 0.406])[:, None, None]
STD = np.array([0.229, 0.224, 0.225])[:, None, None]


def page(seed, size=640):
    """One page as float32 [1, 3, size, size]."""
    r = np.random.default_rng(seed)
    img = np.full((size, size), 245.0) + r.normal(0, 3, (size, size))
    y = 30
    while y < size - 40:
        h = int(r.integers(14, 30))
        x = int(r.integers(10, 60))
        while x < size - 40:
            for _ in range(int(r.integers(3, 9))):     # the glyphs of one word
                gw = int(h * r.uniform(0.5, 0.8))
                if x + gw >= size - 10:
                    break
                glyph = np.zeros((h, gw))
                t = max(2, h // 8)                        # stroke width
                for _ in range(int(r.integers(2, 4))):
                    if r.random() < 0.5:
                        c = int(r.integers(0, gw - t + 1))
                        glyph[:, c:c + t] = 1
                    else:
                        c = int(r.integers(0, h - t + 1))
                        glyph[c:c + t, :] = 1
                img[y:y + h, x:x + gw] -= 200 * glyph
                x += gw + max(1, h // 10)
            x += int(h * r.uniform(0.6, 1.2))             # the space between words
        y += h + int(r.integers(10, 30))
    gray = np.clip(img, 0, 255) / 255.0
    return ((np.stack([gray] * 3) - MEAN) / STD)[None].astype(np.float32)


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__.split("\n\n")[1])
    size = int(sys.argv[3]) if len(sys.argv) == 4 else 640
    if size < 96 or size % 32:
        sys.exit(f"text_pages.py: SIZE {size} must be a multiple of 32, at least 96")
    np.save(sys.argv[1], page(int(sys.argv[2]), size))
