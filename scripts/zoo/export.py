#!/usr/bin/env python3
"""Exports the model zoo: small real models from torchvision, timm and transformers, plus common
nn blocks, for scripts/zoo.sh to compile with foundryc. A sweep, not a test: never part of CI.

    /work/zoo-venv/bin/python scripts/zoo/export.py OUT_DIR [--only NAME,...] [--list]

Needs PyTorch (>= 2.9) with torchvision, timm, transformers and numpy. Nothing is downloaded:
weights are random (seeded), transformers models are built from tiny config objects.

Each model gets OUT_DIR/NAME/ with
    model.pt2       ep.run_decompositions() (core ATen)
    model.raw.pt2   ep as torch.export.export returned it (training IR)
    inputs/N.npy, expected/N.npy   eager PyTorch outputs, flattened in graph output order (where the
                    decomposed program gives an output another shape with the same values, its own)
    cases/bN/{inputs,expected}/    dynamic-batch models only, for batch sizes 1, 3, 17, 64
    meta.json       family, source, input shapes, dynamic or not, parameter count
A model that fails to construct or export prints one line (its name and the reason) and is
skipped; the others are still exported. The exit status is 1 when any model failed.

--image-size N exports the torchvision and timm CNN classifiers at NxN images (default 64; 224 is
ImageNet's). --weight-levels N rounds every floating-point parameter and buffer to N evenly spaced
values of its own range before the references are computed: archives that xz packs about 5x
smaller (random float32 weights do not compress), for the device host's 64 MiB per call
(scripts/gpu_bench.sh). Dense convolutions and products run as fast whatever the values.
"""
import argparse
import inspect
import json
import os
import sys
import time
import traceback
import warnings

import numpy as np
import torch
import torch.nn as nn
import torch.utils._pytree as pytree

SEED = 0
CNN_IMAGE_SIZE = 64  # --image-size
DYNAMIC_BATCHES = (1, 3, 17, 64)
DYNAMIC_EXPORT_BATCH = 4
# dynamic="seq": (batch, length) of the cases and of the export; batch 1..16, length 2..100
DYNAMIC_SEQ_CASES = ((1, 2), (1, 5), (3, 17), (2, 64))
DYNAMIC_SEQ_EXPORT = (2, 12)
# dynamic="image": (batch, height, width) of the cases and of the export; batch 1..4, height and
# width 32*(2..8) (`32 * Dim`: PyTorch cannot export a CNN's pools over a plain Dim)
DYNAMIC_IMAGE_CASES = ((1, 64, 64), (2, 96, 160), (1, 256, 64), (3, 128, 224))
DYNAMIC_IMAGE_EXPORT = (2, 96, 128)

# name -> (family, source, builder); a builder returns (module, example inputs tuple).
REGISTRY = {}


def model(name, family, source, dynamic=False):
    """Registers a builder. dynamic=True exports dimension 0 of every input as Dim('batch'), and
    the builder takes the batch; dynamic="seq" dimensions 0 and 1 as Dim('batch') and Dim('seq'),
    and the builder takes (batch, seq); dynamic="image" dimensions 0, 2 and 3 as the batch and
    multiples of 32, and the builder takes (batch, height, width)."""
    def register(builder):
        REGISTRY[name] = dict(family=family, source=source, builder=builder, dynamic=dynamic)
        return builder
    return register


def image(size, channels=3, batch=1):
    return (torch.randn(batch, channels, size, size),)


def tokens(vocab, seq=12, batch=1):
    return torch.randint(0, vocab, (batch, seq))


def padding_mask(seq=12, batch=1, pad=3):
    """An attention mask whose last `pad` positions are padding, so the mask matters."""
    mask = torch.ones(batch, seq, dtype=torch.long)
    mask[:, seq - pad:] = 0
    return mask


class HFWrapper(nn.Module):
    """Calls a transformers model with positional inputs (torch.export takes a tuple) by keyword.
    Returns the ModelOutput's tensors as a tuple, in its field order (the order torch.export
    flattens a ModelOutput in): an archive whose outputs are a ModelOutput can be loaded only where
    transformers is installed (torch.export.load rebuilds the output's type)."""

    def __init__(self, inner, names, **fixed):
        super().__init__()
        self.inner, self.names, self.fixed = inner, names, fixed

    def forward(self, *args):
        out = self.inner(**dict(zip(self.names, args)), **self.fixed)
        return out.to_tuple() if hasattr(out, "to_tuple") else out


# --- torchvision classification -------------------------------------------------------------

def tv(name, size=None, **kwargs):
    import torchvision
    model = torchvision.models.get_model(name, weights=None, num_classes=10, **kwargs)
    return model, image(size or CNN_IMAGE_SIZE)


for _name in ("resnet18", "resnet50", "mobilenet_v2", "mobilenet_v3_small", "efficientnet_b0", "regnet_x_400mf",
              "shufflenet_v2_x0_5", "squeezenet1_1", "densenet121", "mnasnet0_5"):
    model("tv_" + _name, "torchvision-classification", "torchvision.models." + _name)(
        lambda _n=_name: tv(_n))

model("tv_googlenet", "torchvision-classification", "torchvision.models.googlenet(aux_logits=False)")(
    lambda: tv("googlenet", aux_logits=False, init_weights=True))


@model("tv_convnext_small_cfg", "torchvision-classification",
       "torchvision ConvNeXt, convnext_tiny's layout at 1/4 width and 1 block per stage")
def _():
    from torchvision.models.convnext import CNBlockConfig, ConvNeXt
    cfg = [CNBlockConfig(24, 48, 1), CNBlockConfig(48, 96, 1), CNBlockConfig(96, 192, 1), CNBlockConfig(192, None, 1)]
    return ConvNeXt(cfg, num_classes=10), image(64)


@model("tv_vit_small_cfg", "torchvision-classification", "torchvision VisionTransformer(32px, patch 8, 2 layers, dim 32)")
def _():
    from torchvision.models import VisionTransformer
    return VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=2, hidden_dim=32, mlp_dim=64,
                             num_classes=10), image(32)


@model("tv_swin_small_cfg", "torchvision-classification", "torchvision SwinTransformer(dim 24, depths [2, 2], window 4)")
def _():
    from torchvision.models import SwinTransformer
    return SwinTransformer(patch_size=[4, 4], embed_dim=24, depths=[2, 2], num_heads=[2, 4], window_size=[4, 4],
                           num_classes=10), image(32)


@model("tv_maxvit_small_cfg", "torchvision-classification", "torchvision MaxVit(64px, 2 blocks of 16 and 32 channels)")
def _():
    from torchvision.models import MaxVit
    return MaxVit(input_size=(64, 64), stem_channels=16, partition_size=2, block_channels=[16, 32],
                  block_layers=[1, 1], head_dim=8, stochastic_depth_prob=0.0, num_classes=10), image(64)


# --- torchvision segmentation and detection backbones -----------------------------------------

for _name in ("lraspp_mobilenet_v3_large", "deeplabv3_mobilenet_v3_large", "fcn_resnet50"):
    model("tv_" + _name, "torchvision-segmentation", "torchvision.models.segmentation." + _name)(
        lambda _n=_name: _segmentation(_n))


def _segmentation(name):
    import torchvision
    builder = getattr(torchvision.models.segmentation, name)
    return builder(weights=None, weights_backbone=None, num_classes=3), image(64)


@model("tv_resnet18_fpn", "torchvision-detection-backbone", "torchvision resnet_fpn_backbone('resnet18')")
def _():
    from torchvision.models.detection.backbone_utils import resnet_fpn_backbone
    return resnet_fpn_backbone(backbone_name="resnet18", weights=None, trainable_layers=5), image(128)


@model("tv_fasterrcnn_mobilenet_v3_fpn_backbone", "torchvision-detection-backbone",
       "torchvision fasterrcnn_mobilenet_v3_large_fpn(...).backbone (feature extractor + FPN, no heads)")
def _():
    import torchvision
    detector = torchvision.models.detection.fasterrcnn_mobilenet_v3_large_fpn(weights=None, weights_backbone=None)
    return detector.backbone, image(128)


# --- timm -------------------------------------------------------------------------------------

def timm_model(name, size, **kwargs):
    import timm
    return timm.create_model(name, pretrained=False, num_classes=10, **kwargs), image(size or CNN_IMAGE_SIZE)


# Size None: --image-size.
for _name, _size, _kw in (("resnet18", None, {}), ("efficientnet_b0", None, {}), ("mobilenetv3_small_050", None, {}),
                          ("convnext_atto", None, {}), ("vit_tiny_patch16_224", 32, {"img_size": 32}),
                          ("deit_tiny_patch16_224", 32, {"img_size": 32}), ("regnetx_002", 64, {}),
                          ("ghostnet_050", 64, {}), ("mobilevit_xxs", 64, {}), ("levit_128s", 64, {"img_size": 64}),
                          ("resnext26ts", 64, {}), ("mixer_s32_224", 64, {"img_size": 64})):
    model("timm_" + _name, "timm", "timm.create_model('%s', %s)" % (_name, _kw or ""))(
        lambda _n=_name, _s=_size, _k=_kw: timm_model(_n, _s, **_k))


# The second batch (2026-12-06): more architectures, each at its own image size. ViT-like ones that
# take img_size get 64; the others keep their layout and get the smallest size they accept.
TIMM_SIZES = {"inception_v3": 128, "efficientformer_l1": 224, "halonet26t": 256, "crossvit_tiny_240": 240,
              "bat_resnext26ts": 256}
TIMM_MORE = """efficientnetv2_rw_t tf_efficientnetv2_b0 regnety_002 repvgg_a0 dla34 hrnet_w18_small inception_v3
densenet121 poolformer_s12 resmlp_12_224 cait_xxs24_224 coat_lite_tiny pit_ti_224 tnt_s_patch16_224 twins_svt_small
visformer_tiny edgenext_xx_small efficientformer_l1 fastvit_t8 tiny_vit_5m_224 eca_nfnet_l0 rexnet_100 lcnet_050
gernet_s sebotnet33ts_256 halonet26t swin_tiny_patch4_window7_224 beit_base_patch16_224 eva02_tiny_patch14_224
xcit_nano_12_p16_224 convit_tiny crossvit_tiny_240 mobileone_s0 repghostnet_050 ghostnetv2_100 efficientvit_b0
efficientvit_m0 ese_vovnet19b_dw selecsls42b res2net50_14w_8s resnest14d skresnet18 nest_tiny gcvit_xxtiny davit_tiny
coatnet_nano_rw_224 focalnet_tiny_srf inception_next_tiny hiera_tiny_224 mobilenetv4_conv_small mambaout_femto
hgnetv2_b0 starnet_s1 fastvit_mci0 vit_small_patch16_rope_224 convformer_s18 caformer_s18 sequencer2d_s gmlp_ti16_224
resnetv2_50 bat_resnext26ts lambda_resnet26t cspresnet50 darknet53 dpn68 nf_resnet26 regnetz_b16 mobilevitv2_050
efficientnet_lite0 tinynet_a semnasnet_050 mixnet_s res2next50 volo_d1_224 pvt_v2_b0 vit_relpos_small_patch16_224
flexivit_small deit3_small_patch16_224 levit_conv_128s rdnet_tiny fasternet_t0 shvit_s1 ghostnetv3_050""".split()


def timm_any_size(name):
    import timm
    if name in TIMM_SIZES:
        return timm.create_model(name, pretrained=False, num_classes=10), image(TIMM_SIZES[name])
    try:
        return timm.create_model(name, pretrained=False, num_classes=10, img_size=64), image(64)
    except TypeError:  # no img_size: a CNN, any size
        return timm.create_model(name, pretrained=False, num_classes=10), image(64)


for _name in TIMM_MORE:
    model("timm_" + _name, "timm", "timm.create_model('%s')" % _name)(lambda _n=_name: timm_any_size(_n))


# --- transformers (tiny configs, random weights) ----------------------------------------------

VOCAB, SEQ = 500, 12
TINY = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64)


@model("hf_bert", "transformers", "transformers BertModel, tiny config")
def _(batch=1):
    from transformers import BertConfig, BertModel
    cfg = BertConfig(vocab_size=VOCAB, max_position_embeddings=64, **TINY)
    return HFWrapper(BertModel(cfg), ["input_ids", "attention_mask"]), (tokens(VOCAB, SEQ, batch), padding_mask(SEQ, batch))


@model("hf_distilbert", "transformers", "transformers DistilBertModel, tiny config")
def _():
    from transformers import DistilBertConfig, DistilBertModel
    cfg = DistilBertConfig(vocab_size=VOCAB, dim=32, n_layers=2, n_heads=2, hidden_dim=64, max_position_embeddings=64)
    return HFWrapper(DistilBertModel(cfg), ["input_ids", "attention_mask"]), (tokens(VOCAB), padding_mask())


@model("hf_gpt2", "transformers", "transformers GPT2LMHeadModel, tiny config, no KV cache")
def _():
    from transformers import GPT2Config, GPT2LMHeadModel
    cfg = GPT2Config(vocab_size=VOCAB, n_positions=64, n_embd=32, n_layer=2, n_head=2, bos_token_id=0, eos_token_id=0)
    return HFWrapper(GPT2LMHeadModel(cfg), ["input_ids", "attention_mask"], use_cache=False), (tokens(VOCAB), padding_mask())


LONG_SEQ = 256  # long enough that foundryc fuses the attention (passes/fuse_attention.h)


@model("hf_gpt2_long", "transformers", "transformers GPT2LMHeadModel, 128 wide, 2 heads, 256 tokens (30 padding)")
def _():
    from transformers import GPT2Config, GPT2LMHeadModel
    cfg = GPT2Config(vocab_size=VOCAB, n_positions=512, n_embd=128, n_layer=2, n_head=2, bos_token_id=0, eos_token_id=0)
    return (HFWrapper(GPT2LMHeadModel(cfg), ["input_ids", "attention_mask"], use_cache=False),
            (tokens(VOCAB, LONG_SEQ), padding_mask(LONG_SEQ, pad=30)))


@model("hf_bert_long", "transformers", "transformers BertModel, 128 wide, 2 heads, 256 tokens (30 padding)")
def _():
    from transformers import BertConfig, BertModel
    cfg = BertConfig(vocab_size=VOCAB, hidden_size=128, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=256, max_position_embeddings=512)
    return HFWrapper(BertModel(cfg), ["input_ids", "attention_mask"]), (tokens(VOCAB, LONG_SEQ), padding_mask(LONG_SEQ, pad=30))


@model("hf_llama", "transformers", "transformers LlamaForCausalLM, tiny config, attention mask, no KV cache")
def _():
    from transformers import LlamaConfig, LlamaForCausalLM
    cfg = LlamaConfig(vocab_size=VOCAB, max_position_embeddings=64, num_key_value_heads=1, **TINY)
    return HFWrapper(LlamaForCausalLM(cfg), ["input_ids", "attention_mask"], use_cache=False), (tokens(VOCAB), padding_mask())


@model("hf_qwen2", "transformers", "transformers Qwen2Model, tiny config, attention mask, no KV cache")
def _():
    from transformers import Qwen2Config, Qwen2Model
    cfg = Qwen2Config(vocab_size=VOCAB, max_position_embeddings=64, num_key_value_heads=1, **TINY)
    return HFWrapper(Qwen2Model(cfg), ["input_ids", "attention_mask"], use_cache=False), (tokens(VOCAB), padding_mask())


@model("hf_t5_encoder", "transformers", "transformers T5EncoderModel, tiny config")
def _():
    from transformers import T5Config, T5EncoderModel
    cfg = T5Config(vocab_size=VOCAB, d_model=32, d_kv=16, d_ff=64, num_layers=2, num_heads=2)
    return HFWrapper(T5EncoderModel(cfg), ["input_ids", "attention_mask"]), (tokens(VOCAB), padding_mask())


@model("hf_whisper_encoder", "transformers", "transformers WhisperModel(...).encoder, tiny config, 16 mel bins x 32 frames")
def _():
    from transformers import WhisperConfig, WhisperModel
    cfg = WhisperConfig(vocab_size=VOCAB, num_mel_bins=16, d_model=32, encoder_layers=2, encoder_attention_heads=2,
                        decoder_layers=1, decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64,
                        max_source_positions=16, max_target_positions=16, pad_token_id=0, bos_token_id=0,
                        eos_token_id=0, decoder_start_token_id=0)  # the defaults (50256...) are outside the tiny vocabulary
    return HFWrapper(WhisperModel(cfg).encoder, ["input_features"]), (torch.randn(1, 16, 32),)


@model("hf_wav2vec2", "transformers", "transformers Wav2Vec2Model, tiny config, 400 samples")
def _():
    from transformers import Wav2Vec2Config, Wav2Vec2Model
    cfg = Wav2Vec2Config(conv_dim=(16, 16), conv_stride=(5, 2), conv_kernel=(10, 3), num_conv_pos_embeddings=16,
                         num_conv_pos_embedding_groups=4, vocab_size=32, **TINY)
    return HFWrapper(Wav2Vec2Model(cfg), ["input_values"]), (torch.randn(1, 400),)


@model("hf_vit", "transformers", "transformers ViTModel, tiny config, 32px, patch 8")
def _():
    from transformers import ViTConfig, ViTModel
    cfg = ViTConfig(image_size=32, patch_size=8, **TINY)
    return HFWrapper(ViTModel(cfg), ["pixel_values"]), image(32)


@model("hf_clip_text", "transformers", "transformers CLIPTextModel, tiny config")
def _():
    from transformers import CLIPTextConfig, CLIPTextModel
    cfg = CLIPTextConfig(vocab_size=VOCAB, max_position_embeddings=64, **TINY)
    return HFWrapper(CLIPTextModel(cfg), ["input_ids", "attention_mask"]), (tokens(VOCAB), padding_mask())


# The second batch: one line each, a config class and a model class of transformers with tiny
# sizes; inputs by name (token ids and a padding mask, 64x64 images, 800 audio samples, a
# [1, 64, 16] spectrogram), `fixed` passed to every call.
def hf_tiny(name, config, model_class, inputs=("input_ids", "attention_mask"), fixed=None, shapes=None, **sizes):
    """shapes: {input name: shape} for inputs drawn from randn instead of the defaults below."""
    def build():
        import transformers
        module = getattr(transformers, model_class)(getattr(transformers, config)(**sizes))
        make = dict(input_ids=lambda: tokens(VOCAB), decoder_input_ids=lambda: tokens(VOCAB), attention_mask=padding_mask,
                    pixel_values=lambda: image(64)[0], input_values=lambda: torch.randn(1, 800),
                    input_features=lambda: torch.randn(1, 64, 16))
        make.update({key: (lambda shape=shape: torch.randn(*shape)) for key, shape in (shapes or {}).items()})
        return HFWrapper(module, list(inputs), **(fixed or {})), tuple(make[i]() for i in inputs)
    model("hf_" + name, "transformers", "transformers %s, tiny config" % model_class)(build)


LM = dict(vocab_size=VOCAB, max_position_embeddings=64)
NO_CACHE = dict(use_cache=False)
PIXELS = dict(image_size=64, num_channels=3)
AUDIO = dict(conv_dim=(16, 16), conv_stride=(5, 2), conv_kernel=(10, 3), num_conv_pos_embeddings=16,
             num_conv_pos_embedding_groups=4, vocab_size=32)
hf_tiny("roberta", "RobertaConfig", "RobertaModel", **LM, **TINY)
hf_tiny("albert", "AlbertConfig", "AlbertModel", embedding_size=16, **LM, **TINY)
hf_tiny("electra", "ElectraConfig", "ElectraModel", embedding_size=16, **LM, **TINY)
hf_tiny("deberta_v2", "DebertaV2Config", "DebertaV2Model", **LM, **TINY)
hf_tiny("mobilebert", "MobileBertConfig", "MobileBertModel", embedding_size=16, intra_bottleneck_size=16,
        true_hidden_size=16, num_feedforward_networks=2, **LM, **TINY)
hf_tiny("squeezebert", "SqueezeBertConfig", "SqueezeBertModel", embedding_size=32, **LM, **TINY)
hf_tiny("convbert", "ConvBertConfig", "ConvBertModel", embedding_size=32, **LM, **TINY)
hf_tiny("funnel", "FunnelConfig", "FunnelModel", vocab_size=VOCAB, block_sizes=[1, 1], d_model=32, n_head=2, d_head=16,
        d_inner=64)
hf_tiny("opt", "OPTConfig", "OPTForCausalLM", fixed=NO_CACHE, ffn_dim=64, word_embed_proj_dim=32, vocab_size=VOCAB,
        max_position_embeddings=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=2)
hf_tiny("gpt_neo", "GPTNeoConfig", "GPTNeoForCausalLM", fixed=NO_CACHE, vocab_size=VOCAB, max_position_embeddings=64,
        hidden_size=32, num_layers=2, num_heads=2, attention_types=[[["global", "local"], 1]], window_size=4)
hf_tiny("gptj", "GPTJConfig", "GPTJModel", fixed=NO_CACHE, vocab_size=VOCAB, n_positions=64, n_embd=32, n_layer=2,
        n_head=2, rotary_dim=8)
hf_tiny("gpt_neox", "GPTNeoXConfig", "GPTNeoXModel", fixed=NO_CACHE, rotary_pct=0.5, **LM, **TINY)
hf_tiny("bloom", "BloomConfig", "BloomModel", fixed=NO_CACHE, vocab_size=VOCAB, hidden_size=32, n_layer=2, n_head=2)
hf_tiny("falcon", "FalconConfig", "FalconModel", fixed=NO_CACHE, vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2,
        num_attention_heads=2)
hf_tiny("mistral", "MistralConfig", "MistralModel", fixed=NO_CACHE, sliding_window=4, num_key_value_heads=1, **LM, **TINY)
hf_tiny("phi", "PhiConfig", "PhiModel", fixed=NO_CACHE, partial_rotary_factor=0.5, **LM, **TINY)
hf_tiny("gemma", "GemmaConfig", "GemmaModel", fixed=NO_CACHE, head_dim=16, num_key_value_heads=1, **LM, **TINY)
hf_tiny("gpt_bigcode", "GPTBigCodeConfig", "GPTBigCodeModel", fixed=NO_CACHE, vocab_size=VOCAB, n_positions=64,
        n_embd=32, n_layer=2, n_head=2, multi_query=True)
hf_tiny("bart", "BartConfig", "BartModel", ("input_ids", "attention_mask", "decoder_input_ids"), NO_CACHE,
        vocab_size=VOCAB, max_position_embeddings=64, d_model=32, encoder_layers=1, decoder_layers=1,
        encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64)
hf_tiny("t5_full", "T5Config", "T5Model", ("input_ids", "attention_mask", "decoder_input_ids"), NO_CACHE,
        vocab_size=VOCAB, d_model=32, d_kv=16, d_ff=64, num_layers=2, num_heads=2)
hf_tiny("modernbert", "ModernBertConfig", "ModernBertModel", pad_token_id=0, **LM, **TINY)
hf_tiny("beit", "BeitConfig", "BeitModel", ("pixel_values",), patch_size=8, use_relative_position_bias=True,
        **PIXELS, **TINY)
hf_tiny("dinov2", "Dinov2Config", "Dinov2Model", ("pixel_values",), patch_size=8, **PIXELS, **TINY)
hf_tiny("swin", "SwinConfig", "SwinModel", ("pixel_values",), embed_dim=16, depths=[1, 1], num_heads=[1, 2],
        window_size=4, patch_size=4, **PIXELS)
hf_tiny("convnext", "ConvNextConfig", "ConvNextModel", ("pixel_values",), hidden_sizes=[16, 32], depths=[1, 1],
        num_stages=2)
hf_tiny("segformer", "SegformerConfig", "SegformerForSemanticSegmentation", ("pixel_values",), num_encoder_blocks=2,
        depths=[1, 1], sr_ratios=[2, 1], hidden_sizes=[16, 32], num_attention_heads=[1, 2], decoder_hidden_size=32,
        num_labels=4, strides=[4, 2], patch_sizes=[7, 3], mlp_ratios=[2, 2])
hf_tiny("mobilevit", "MobileViTConfig", "MobileViTModel", ("pixel_values",), image_size=64, hidden_sizes=[32, 40, 48],
        neck_hidden_sizes=[8, 8, 16, 16, 24, 32, 64])
hf_tiny("yolos", "YolosConfig", "YolosModel", ("pixel_values",), image_size=[64, 64], patch_size=16,
        num_detection_tokens=4, **TINY)
hf_tiny("clip_vision", "CLIPVisionConfig", "CLIPVisionModel", ("pixel_values",), patch_size=16, **PIXELS, **TINY)
hf_tiny("siglip_vision", "SiglipVisionConfig", "SiglipVisionModel", ("pixel_values",), patch_size=16, **PIXELS, **TINY)
hf_tiny("hubert", "HubertConfig", "HubertModel", ("input_values",), **AUDIO, **TINY)
hf_tiny("wavlm", "WavLMConfig", "WavLMModel", ("input_values",), num_buckets=16, max_bucket_distance=32, **AUDIO, **TINY)
hf_tiny("resnet", "ResNetConfig", "ResNetModel", ("pixel_values",), embedding_size=16, hidden_sizes=[16, 32],
        depths=[1, 1])
hf_tiny("levit", "LevitConfig", "LevitModel", ("pixel_values",), image_size=64, hidden_sizes=[32, 48, 64],
        num_attention_heads=[1, 2, 2], depths=[1, 1, 1], key_dim=[8, 8, 8])


# The third batch (2026-12-06): the rest of torchvision's classifiers, its video models and RAFT;
# more timm architectures; more transformers families (mixture-of-experts, state space,
# encoder-decoder). torchvision's full detectors do not export (their NMS is data-dependent).
for _name in ("alexnet", "vgg11_bn", "wide_resnet50_2", "resnext50_32x4d", "efficientnet_v2_s", "regnet_y_400mf",
              "mobilenet_v3_large", "shufflenet_v2_x1_0", "mnasnet1_0", "convnext_tiny", "swin_v2_t", "efficientnet_b3"):
    model("tv_" + _name, "torchvision-classification", "torchvision.models." + _name)(
        lambda _n=_name: tv(_n))
model("tv_inception_v3", "torchvision-classification", "torchvision.models.inception_v3(aux_logits=False), 96px")(
    lambda: tv("inception_v3", 96, aux_logits=False, init_weights=True))
model("tv_vit_b_16", "torchvision-classification", "torchvision.models.vit_b_16(image_size=64)")(
    lambda: tv("vit_b_16", 64, image_size=64))
model("tv_deeplabv3_resnet50", "torchvision-segmentation", "torchvision.models.segmentation.deeplabv3_resnet50")(
    lambda: _segmentation("deeplabv3_resnet50"))


def tv_video(name):
    import torchvision
    return getattr(torchvision.models.video, name)(weights=None, num_classes=10), (torch.randn(1, 3, 8, 64, 64),)


for _name in ("r3d_18", "mc3_18", "r2plus1d_18", "swin3d_t"):
    model("tv_" + _name, "torchvision-video", "torchvision.models.video.%s, 8 frames of 64x64" % _name)(
        lambda _n=_name: tv_video(_n))


@model("tv_raft_small", "torchvision-optical-flow", "torchvision.models.optical_flow.raft_small, 128x128, 4 updates")
def _():
    import torchvision

    class Raft(nn.Module):
        def __init__(self):
            super().__init__()
            self.raft = torchvision.models.optical_flow.raft_small(weights=None)

        def forward(self, a, b):
            return self.raft(a, b, num_flow_updates=4)[-1]
    return Raft(), (torch.randn(1, 3, 128, 128), torch.randn(1, 3, 128, 128))


TIMM_THIRD = """mobilenetv3_large_100 efficientnet_b3 resnet50d seresnext26d_32x4d regnety_016 convnextv2_atto
efficientformerv2_s0 swinv2_cr_tiny_ns_224 maxvit_nano_rw_256 ghostnet_100 hardcorenas_a mnasnet_100 spnasnet_100
fbnetc_100 tresnet_m xception41 inception_v4 inception_resnet_v2 cspdarknet53 dla60x hrnet_w18 vgg11_bn resnet18d
repvit_m0_9 fastvit_sa12 nextvit_small vit_small_patch14_dinov2 mobilenetv4_hybrid_medium resnet26t ecaresnet26t
regnetx_004 legacy_seresnet18 nf_regnet_b0 cs3darknet_s hgnet_tiny vit_little_patch16_reg4_gap_256
deit_tiny_distilled_patch16_224 poolformerv2_s12 mobilevitv2_075 tinynet_e mixnet_m gcresnet33ts eca_botnext26ts_256
haloregnetz_b efficientvit_l1 tiny_vit_11m_224 vit_medium_patch16_gap_256 twins_pcpvt_small""".split()
TIMM_SIZES.update(maxvit_nano_rw_256=256, eca_botnext26ts_256=256, haloregnetz_b=224, inception_v4=96,
                  inception_resnet_v2=96, xception41=96, tresnet_m=64)
for _name in TIMM_THIRD:
    model("timm_" + _name, "timm", "timm.create_model('%s')" % _name)(lambda _n=_name: timm_any_size(_n))

DECODER = ("input_ids", "attention_mask", "decoder_input_ids")
SEQ2SEQ = dict(vocab_size=VOCAB, max_position_embeddings=64, d_model=32, encoder_layers=1, decoder_layers=1,
               encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64,
               pad_token_id=0, bos_token_id=0, eos_token_id=0, decoder_start_token_id=0)
hf_tiny("xlm_roberta", "XLMRobertaConfig", "XLMRobertaModel", **LM, **TINY)
hf_tiny("mpnet", "MPNetConfig", "MPNetModel", **LM, **TINY)
hf_tiny("deberta", "DebertaConfig", "DebertaModel", **LM, **TINY)
hf_tiny("xlnet", "XLNetConfig", "XLNetModel", fixed=NO_CACHE, vocab_size=VOCAB, d_model=32, n_layer=2, n_head=2,
        d_inner=64)
hf_tiny("ctrl", "CTRLConfig", "CTRLModel", fixed=NO_CACHE, vocab_size=VOCAB, n_positions=64, n_embd=32, n_layer=2,
        n_head=2, dff=64)
hf_tiny("codegen", "CodeGenConfig", "CodeGenModel", fixed=NO_CACHE, vocab_size=VOCAB, n_positions=64, n_ctx=64,
        n_embd=32, n_layer=2, n_head=2, rotary_dim=8)
hf_tiny("biogpt", "BioGptConfig", "BioGptModel", fixed=NO_CACHE, **LM, **TINY)
hf_tiny("xglm", "XGLMConfig", "XGLMModel", fixed=NO_CACHE, vocab_size=VOCAB, max_position_embeddings=64, d_model=32,
        num_layers=2, attention_heads=2, ffn_dim=64)
hf_tiny("phi3", "Phi3Config", "Phi3Model", fixed=NO_CACHE, num_key_value_heads=1, pad_token_id=0, **LM, **TINY)
hf_tiny("gemma2", "Gemma2Config", "Gemma2Model", fixed=NO_CACHE, head_dim=16, num_key_value_heads=1, sliding_window=4,
        **LM, **TINY)
hf_tiny("olmo", "OlmoConfig", "OlmoModel", fixed=NO_CACHE, pad_token_id=0, **LM, **TINY)
hf_tiny("starcoder2", "Starcoder2Config", "Starcoder2Model", fixed=NO_CACHE, num_key_value_heads=1, **LM, **TINY)
hf_tiny("granite", "GraniteConfig", "GraniteModel", fixed=NO_CACHE, **LM, **TINY)
hf_tiny("qwen3", "Qwen3Config", "Qwen3Model", fixed=NO_CACHE, head_dim=16, num_key_value_heads=1, **LM, **TINY)
hf_tiny("mixtral", "MixtralConfig", "MixtralModel", fixed=NO_CACHE, num_local_experts=4, num_experts_per_tok=2,
        num_key_value_heads=1, **LM, **TINY)
hf_tiny("qwen2_moe", "Qwen2MoeConfig", "Qwen2MoeModel", fixed=NO_CACHE, num_experts=4, num_experts_per_tok=2,
        moe_intermediate_size=32, shared_expert_intermediate_size=32, num_key_value_heads=1, **LM, **TINY)
hf_tiny("mamba", "MambaConfig", "MambaModel", ("input_ids",), NO_CACHE, vocab_size=VOCAB, hidden_size=32,
        num_hidden_layers=2, state_size=8)
hf_tiny("marian", "MarianConfig", "MarianMTModel", DECODER, NO_CACHE, **SEQ2SEQ)
hf_tiny("pegasus", "PegasusConfig", "PegasusModel", DECODER, NO_CACHE, **SEQ2SEQ)
hf_tiny("mbart", "MBartConfig", "MBartModel", DECODER, NO_CACHE, **SEQ2SEQ)
hf_tiny("m2m100", "M2M100Config", "M2M100Model", DECODER, NO_CACHE, **SEQ2SEQ)
hf_tiny("blenderbot_small", "BlenderbotSmallConfig", "BlenderbotSmallModel", DECODER, NO_CACHE, **SEQ2SEQ)
hf_tiny("whisper_full", "WhisperConfig", "WhisperModel", ("input_features", "decoder_input_ids"), NO_CACHE,
        num_mel_bins=64, max_source_positions=8, max_target_positions=16, **dict(SEQ2SEQ, max_position_embeddings=16))
hf_tiny("deit", "DeiTConfig", "DeiTModel", ("pixel_values",), patch_size=8, **PIXELS, **TINY)
hf_tiny("convnextv2", "ConvNextV2Config", "ConvNextV2Model", ("pixel_values",), hidden_sizes=[16, 32], depths=[1, 1],
        num_stages=2)
hf_tiny("regnet", "RegNetConfig", "RegNetModel", ("pixel_values",), embedding_size=16, hidden_sizes=[16, 32],
        depths=[1, 1], groups_width=8)
hf_tiny("mobilenet_v2", "MobileNetV2Config", "MobileNetV2Model", ("pixel_values",), image_size=64, depth_multiplier=0.35)
hf_tiny("efficientnet", "EfficientNetConfig", "EfficientNetModel", ("pixel_values",), image_size=64, width_coefficient=0.25,
        depth_coefficient=0.25, hidden_dim=320)
hf_tiny("bit", "BitConfig", "BitModel", ("pixel_values",), embedding_size=32, hidden_sizes=[128, 256], depths=[1, 1])
hf_tiny("poolformer", "PoolFormerConfig", "PoolFormerModel", ("pixel_values",), hidden_sizes=[16, 32], depths=[1, 1],
        num_encoder_blocks=2, patch_sizes=[7, 3], strides=[4, 2], padding=[2, 1])
hf_tiny("dpt", "DPTConfig", "DPTForDepthEstimation", ("pixel_values",), patch_size=16, image_size=64,
        backbone_out_indices=[0, 1], neck_hidden_sizes=[16, 32], fusion_hidden_size=32, reassemble_factors=[4, 2],
        **dict(TINY, num_hidden_layers=2))
hf_tiny("glpn", "GLPNConfig", "GLPNForDepthEstimation", ("pixel_values",), num_encoder_blocks=2, depths=[1, 1],
        sr_ratios=[2, 1], hidden_sizes=[16, 32], num_attention_heads=[1, 2], patch_sizes=[7, 3], strides=[4, 2],
        mlp_ratios=[2, 2], decoder_hidden_size=16)
hf_tiny("data2vec_audio", "Data2VecAudioConfig", "Data2VecAudioModel", ("input_values",),
        **dict(AUDIO, num_conv_pos_embeddings=4), **TINY)
hf_tiny("sew", "SEWConfig", "SEWModel", ("input_values",), squeeze_factor=2, **AUDIO, **TINY)
hf_tiny("unispeech", "UniSpeechConfig", "UniSpeechModel", ("input_values",), **AUDIO, **TINY)
hf_tiny("clip", "CLIPConfig", "CLIPModel", ("input_ids", "pixel_values", "attention_mask"), projection_dim=16,
        text_config=dict(vocab_size=VOCAB, max_position_embeddings=64, **TINY),
        vision_config=dict(patch_size=16, **PIXELS, **TINY))


# The fourth batch (2026-12-06): transformers families whose attention, sequence mixing or heads
# differ from the earlier ones: local and block-sparse attention, Fourier mixing, character-level
# downsampling, expert routing, recurrent and chunked state-space scans, time series, audio codecs
# and vocoders, detection, super-resolution, video, masked autoencoding (its noise an input).
hf_tiny("fnet", "FNetConfig", "FNetModel", ("input_ids",), **LM, **TINY)
hf_tiny("esm", "EsmConfig", "EsmModel", position_embedding_type="rotary", pad_token_id=1, **LM, **TINY)
hf_tiny("nezha", "NezhaConfig", "NezhaModel", max_relative_position=8, **LM, **TINY)
hf_tiny("canine", "CanineConfig", "CanineModel", downsampling_rate=4, num_hash_functions=2, num_hash_buckets=64,
        local_transformer_stride=4, **TINY)
hf_tiny("longformer", "LongformerConfig", "LongformerModel", attention_window=4, pad_token_id=1, **LM, **TINY)
hf_tiny("big_bird", "BigBirdConfig", "BigBirdModel", attention_type="original_full", **LM, **TINY)
hf_tiny("long_t5", "LongT5Config", "LongT5EncoderModel", vocab_size=VOCAB, d_model=32, d_kv=16, d_ff=64, num_layers=2,
        num_heads=2, encoder_attention_type="transient-global", local_radius=2, global_block_size=4)
hf_tiny("switch", "SwitchTransformersConfig", "SwitchTransformersEncoderModel", vocab_size=VOCAB, d_model=32, d_kv=16,
        d_ff=64, num_layers=2, num_heads=2, num_experts=4, expert_capacity=8, num_sparse_encoder_layers=1)
hf_tiny("jamba", "JambaConfig", "JambaModel", fixed=NO_CACHE, use_mamba_kernels=False, num_experts=2,
        num_experts_per_tok=1, expert_layer_period=2, expert_layer_offset=1, attn_layer_period=2, attn_layer_offset=1,
        mamba_d_state=8, mamba_dt_rank=4, num_key_value_heads=1, **LM, **dict(TINY, num_hidden_layers=4))
hf_tiny("mamba2", "Mamba2Config", "Mamba2Model", ("input_ids",), NO_CACHE, vocab_size=VOCAB, hidden_size=32,
        num_hidden_layers=2, state_size=8, num_heads=4, head_dim=16, n_groups=1, expand=2, chunk_size=4)
hf_tiny("falcon_mamba", "FalconMambaConfig", "FalconMambaModel", ("input_ids",), NO_CACHE, vocab_size=VOCAB,
        hidden_size=32, num_hidden_layers=2, state_size=8)
hf_tiny("rwkv", "RwkvConfig", "RwkvModel", ("input_ids",), NO_CACHE, vocab_size=VOCAB, hidden_size=32,
        num_hidden_layers=2, attention_hidden_size=32, intermediate_size=64, context_length=64)
hf_tiny("patchtst", "PatchTSTConfig", "PatchTSTModel", ("past_values",), shapes=dict(past_values=(1, 32, 3)),
        num_input_channels=3, context_length=32, patch_length=8, patch_stride=8, d_model=32, num_attention_heads=2,
        num_hidden_layers=2, ffn_dim=64)
hf_tiny("patchtsmixer", "PatchTSMixerConfig", "PatchTSMixerModel", ("past_values",), shapes=dict(past_values=(1, 32, 3)),
        num_input_channels=3, context_length=32, patch_length=8, patch_stride=8, d_model=16, num_layers=2)
hf_tiny("encodec", "EncodecConfig", "EncodecModel", ("input_values",), shapes=dict(input_values=(1, 1, 320)),
        hidden_size=16, num_filters=4, upsampling_ratios=[4, 2], codebook_size=32, codebook_dim=16,
        num_lstm_layers=1, target_bandwidths=[1.5], sampling_rate=2400)
hf_tiny("hifigan", "SpeechT5HifiGanConfig", "SpeechT5HifiGan", ("spectrogram",), shapes=dict(spectrogram=(10, 16)),
        model_in_dim=16, upsample_initial_channel=32, upsample_rates=[4, 2], upsample_kernel_sizes=[8, 4],
        resblock_kernel_sizes=[3, 5], resblock_dilation_sizes=[[1, 3], [1, 3]])
hf_tiny("ast", "ASTConfig", "ASTModel", ("input_values",), shapes=dict(input_values=(1, 64, 32)), patch_size=16,
        frequency_stride=10, time_stride=10, max_length=64, num_mel_bins=32, **TINY)
hf_tiny("wav2vec2_conformer", "Wav2Vec2ConformerConfig", "Wav2Vec2ConformerModel", ("input_values",),
        position_embeddings_type="rotary", conv_depthwise_kernel_size=7, **AUDIO, **TINY)
hf_tiny("speech_to_text", "Speech2TextConfig", "Speech2TextModel", ("input_features", "decoder_input_ids"), NO_CACHE,
        shapes=dict(input_features=(1, 32, 16)), input_feat_per_channel=16, conv_channels=32, max_source_positions=64,
        **dict(SEQ2SEQ, max_target_positions=64))
hf_tiny("swin2sr", "Swin2SRConfig", "Swin2SRForImageSuperResolution", ("pixel_values",),
        shapes=dict(pixel_values=(1, 3, 16, 16)), image_size=16, patch_size=1, embed_dim=16, depths=[1, 1],
        num_heads=[1, 1], window_size=4, upscale=2)
hf_tiny("detr", "DetrConfig", "DetrForObjectDetection", ("pixel_values",), use_timm_backbone=False,
        use_pretrained_backbone=False, backbone_config=dict(model_type="resnet", embedding_size=16,
        hidden_sizes=[16, 32, 48, 64], depths=[1, 1, 1, 1], out_features=["stage4"]), d_model=32, encoder_layers=1,
        decoder_layers=1, encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64,
        num_queries=8, num_labels=4)
hf_tiny("vit_mae", "ViTMAEConfig", "ViTMAEModel", ("pixel_values", "noise"), shapes=dict(noise=(1, 16)),
        patch_size=16, mask_ratio=0.5, **PIXELS, **TINY)
hf_tiny("cvt", "CvtConfig", "CvtModel", ("pixel_values",), embed_dim=[16, 32], num_heads=[1, 2], depth=[1, 1],
        patch_sizes=[7, 3], patch_stride=[4, 2], patch_padding=[2, 1], mlp_ratio=[2.0, 2.0], attention_drop_rate=[0.0, 0.0],
        drop_rate=[0.0, 0.0], drop_path_rate=[0.0, 0.0], qkv_bias=[True, True], cls_token=[False, True],
        qkv_projection_method=["dw_bn", "dw_bn"], kernel_qkv=[3, 3], padding_kv=[1, 1], stride_kv=[2, 2],
        padding_q=[1, 1], stride_q=[1, 1])
hf_tiny("pvt_v2", "PvtV2Config", "PvtV2Model", ("pixel_values",), num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1],
        hidden_sizes=[16, 32], num_attention_heads=[1, 2], patch_sizes=[7, 3], strides=[4, 2], mlp_ratios=[2, 2])
hf_tiny("focalnet", "FocalNetConfig", "FocalNetModel", ("pixel_values",), embed_dim=16, depths=[1, 1],
        focal_levels=[2, 2], focal_windows=[3, 3], **PIXELS)
hf_tiny("hiera", "HieraConfig", "HieraModel", ("pixel_values",), image_size=[64, 64], embed_dim=16, depths=[1, 1, 1, 1],
        num_heads=[1, 1, 2, 2], query_stride=[2, 2], masked_unit_size=[4, 4], patch_stride=[4, 4])
hf_tiny("vitdet", "VitDetConfig", "VitDetModel", ("pixel_values",), image_size=64, pretrain_image_size=64, patch_size=8,
        window_size=4, window_block_indices=[0], use_relative_position_embeddings=True, **TINY)
hf_tiny("timesformer", "TimesformerConfig", "TimesformerModel", ("pixel_values",),
        shapes=dict(pixel_values=(1, 4, 3, 32, 32)), image_size=32, patch_size=8, num_frames=4, **TINY)
hf_tiny("videomae", "VideoMAEConfig", "VideoMAEModel", ("pixel_values",), shapes=dict(pixel_values=(1, 4, 3, 32, 32)),
        image_size=32, patch_size=8, num_frames=4, tubelet_size=2, **TINY)
hf_tiny("upernet", "UperNetConfig", "UperNetForSemanticSegmentation", ("pixel_values",),
        backbone_config=dict(model_type="convnext", hidden_sizes=[16, 32, 48, 64], depths=[1, 1, 1, 1],
        out_features=["stage1", "stage2", "stage3", "stage4"]), hidden_size=32, auxiliary_in_channels=48, num_labels=4)
hf_tiny("depth_anything", "DepthAnythingConfig", "DepthAnythingForDepthEstimation", ("pixel_values",),
        shapes=dict(pixel_values=(1, 3, 56, 56)), backbone_config=dict(model_type="dinov2", image_size=56, patch_size=14,
        out_features=["stage1", "stage2"], reshape_hidden_states=False, **TINY), reassemble_hidden_size=32,
        neck_hidden_sizes=[16, 32], reassemble_factors=[2, 1], fusion_hidden_size=16, head_hidden_size=8)
hf_tiny("mobilevitv2", "MobileViTV2Config", "MobileViTV2Model", ("pixel_values",), image_size=64, width_multiplier=0.5)
hf_tiny("groupvit_vision", "GroupViTVisionConfig", "GroupViTVisionModel", ("pixel_values",), depths=[1, 1, 1],
        num_group_tokens=[8, 4, 0], num_output_groups=[8, 4, 4], patch_size=16, **PIXELS, **TINY)


# --- common nn blocks -------------------------------------------------------------------------

class Lambda(nn.Module):
    """A module from a function of (self, *inputs), with submodules given as keywords."""

    def __init__(self, fn, **modules):
        super().__init__()
        self.fn = fn
        for key, value in modules.items():
            setattr(self, key, value)

    def forward(self, *args):
        return self.fn(self, *args)


def block(name, source, fn, inputs, **modules):
    model(name, "nn-block", source)(lambda: (Lambda(fn, **modules), inputs()))


block("nn_lstm", "nn.LSTM(16, 32, 2 layers, batch_first)",
      lambda m, x: m.rnn(x), lambda: (torch.randn(2, 8, 16),), rnn=nn.LSTM(16, 32, num_layers=2, batch_first=True))
block("nn_gru", "nn.GRU(16, 32, bidirectional, batch_first)",
      lambda m, x: m.rnn(x), lambda: (torch.randn(2, 8, 16),), rnn=nn.GRU(16, 32, batch_first=True, bidirectional=True))
block("nn_mha_masks", "nn.MultiheadAttention(32, 4) with key_padding_mask and a causal attn_mask",
      lambda m, x, pad: m.mha(x, x, x, key_padding_mask=pad, attn_mask=torch.triu(torch.ones(8, 8, dtype=torch.bool), 1)),
      lambda: (torch.randn(2, 8, 32), torch.tensor([[False] * 6 + [True] * 2, [False] * 8])),
      mha=nn.MultiheadAttention(32, 4, batch_first=True))
block("nn_transformer_encoder_layer", "nn.TransformerEncoderLayer(32, 4, 64, batch_first) with src_key_padding_mask",
      lambda m, x, pad: m.layer(x, src_key_padding_mask=pad),
      lambda: (torch.randn(2, 8, 32), torch.tensor([[False] * 6 + [True] * 2, [False] * 8])),
      layer=nn.TransformerEncoderLayer(32, 4, 64, batch_first=True))
block("nn_embedding_bag", "nn.EmbeddingBag(100, 16, mode='mean') with offsets",
      lambda m, idx, offsets: m.bag(idx, offsets), lambda: (torch.randint(0, 100, (10,)), torch.tensor([0, 3, 7])),
      bag=nn.EmbeddingBag(100, 16, mode="mean"))
block("nn_upsample", "F.interpolate bilinear (align_corners False and True) and nearest",
      lambda m, x: (nn.functional.interpolate(x, scale_factor=2, mode="bilinear"),
                    nn.functional.interpolate(x, size=(13, 7), mode="bilinear", align_corners=True),
                    nn.functional.interpolate(x, scale_factor=3, mode="nearest")),
      lambda: (torch.randn(1, 3, 8, 8),))
block("nn_norms", "GroupNorm, InstanceNorm2d (affine), LayerNorm on one conv input",
      lambda m, x: (m.gn(x), m.inorm(x), m.ln(x)), lambda: (torch.randn(2, 8, 6, 6),),
      gn=nn.GroupNorm(4, 8), inorm=nn.InstanceNorm2d(8, affine=True), ln=nn.LayerNorm([6, 6]))
block("nn_topk_sort", "torch.topk and torch.sort (values and indices)",
      lambda m, x: (*torch.topk(x, 3, dim=-1), *torch.sort(x, dim=1, descending=True)), lambda: (torch.randn(4, 10),))
block("nn_scatter_gather", "torch.gather, Tensor.scatter and scatter_add",
      lambda m, x, idx: (torch.gather(x, 1, idx), torch.zeros(4, 10).scatter(1, idx, x[:, :3]),
                         torch.zeros(4, 10).scatter_add(1, idx, x[:, :3])),
      lambda: (torch.randn(4, 10), torch.randint(0, 10, (4, 3))))
block("nn_cumsum", "torch.cumsum over both axes and cumprod",
      lambda m, x: (torch.cumsum(x, 0), torch.cumsum(x, 1), torch.cumprod(x * 0.5 + 1, 1)), lambda: (torch.randn(4, 10),))
block("nn_conv1d_convtranspose2d", "nn.Conv1d (dilation 2, padding same) and nn.ConvTranspose2d (stride 2)",
      lambda m, x1, x2: (m.c1(x1), m.ct(x2)), lambda: (torch.randn(2, 4, 20), torch.randn(1, 8, 7, 7)),
      c1=nn.Conv1d(4, 6, 3, dilation=2, padding="same"), ct=nn.ConvTranspose2d(8, 4, 3, stride=2, padding=1, output_padding=1))
block("nn_pixel_shuffle", "nn.PixelShuffle(2) after a conv, and PixelUnshuffle",
      lambda m, x: (nn.functional.pixel_shuffle(m.conv(x), 2), nn.functional.pixel_unshuffle(x, 2)),
      lambda: (torch.randn(1, 4, 8, 8),), conv=nn.Conv2d(4, 16, 3, padding=1))


# --- dynamic batch (Dim('batch', min=1, max=64) on dimension 0 of every input) -----------------

@model("dyn_resnet18", "dynamic-batch", "torchvision.models.resnet18, dynamic batch", dynamic=True)
def _(batch=DYNAMIC_EXPORT_BATCH):
    return tv("resnet18")[0], image(64, batch=batch)


@model("dyn_bert", "dynamic-batch", "transformers BertModel, tiny config, dynamic batch", dynamic=True)
def _(batch=DYNAMIC_EXPORT_BATCH):
    return REGISTRY["hf_bert"]["builder"](batch)


@model("dyn_mlp", "dynamic-batch", "MLP 64-128-128-10 with GELU, dynamic batch", dynamic=True)
def _(batch=DYNAMIC_EXPORT_BATCH):
    mlp = nn.Sequential(nn.Linear(64, 128), nn.GELU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 10))
    return mlp, (torch.randn(batch, 64),)


# --- dynamic batch, height and width (dynamic="image": dims 0, 2 and 3 of the image) ------------
# Convolution, pooling and resampling windows over sizes the export never saw.

def tv_dynamic_image(name, segmentation=False):
    def build(batch=DYNAMIC_IMAGE_EXPORT[0], height=DYNAMIC_IMAGE_EXPORT[1], width=DYNAMIC_IMAGE_EXPORT[2]):
        import torchvision
        kwargs = dict(weights_backbone=None) if segmentation else {}
        module = torchvision.models.get_model(name, weights=None, num_classes=10, **kwargs)
        return module, (torch.randn(batch, 3, height, width),)
    model("dimg_" + name, "dynamic-image", "torchvision.models.%s%s, dynamic batch, height and width"
          % ("segmentation." if segmentation else "", name), dynamic="image")(build)


for _name in ("resnet18", "mobilenet_v2", "mobilenet_v3_small", "efficientnet_b0", "convnext_tiny", "regnet_y_400mf",
              "shufflenet_v2_x0_5", "squeezenet1_1", "densenet121", "mnasnet0_5", "vgg11"):
    tv_dynamic_image(_name)
for _name in ("lraspp_mobilenet_v3_large", "deeplabv3_mobilenet_v3_large", "fcn_resnet50"):
    tv_dynamic_image(_name, segmentation=True)


# --- dynamic batch and sequence length (dynamic="seq": dims 0 and 1 of every input) -------------
# Positions up to the run-time length, masks built from it, attention over it and the first token
# of each sequence (BERT's pooler) at lengths the export never saw.

def hf_dynamic_seq(name, config, model_class, inputs=("input_ids", "attention_mask"), fixed=None, **sizes):
    def build(batch=DYNAMIC_SEQ_EXPORT[0], seq=DYNAMIC_SEQ_EXPORT[1]):
        import transformers
        module = getattr(transformers, model_class)(getattr(transformers, config)(**sizes))
        make = dict(input_ids=lambda: tokens(VOCAB, seq, batch), decoder_input_ids=lambda: tokens(VOCAB, seq, batch),
                    attention_mask=lambda: padding_mask(seq, batch, pad=min(3, seq - 1)))
        return HFWrapper(module, list(inputs), **(fixed or {})), tuple(make[i]() for i in inputs)
    model("dseq_" + name, "dynamic-seq", "transformers %s, tiny config, dynamic batch and length" % model_class,
          dynamic="seq")(build)


LONG_POSITIONS = dict(vocab_size=VOCAB, max_position_embeddings=128)
hf_dynamic_seq("bert", "BertConfig", "BertModel", **LONG_POSITIONS, **TINY)
hf_dynamic_seq("roberta", "RobertaConfig", "RobertaModel", vocab_size=VOCAB, max_position_embeddings=130, **TINY)
hf_dynamic_seq("electra", "ElectraConfig", "ElectraModel", embedding_size=16, **LONG_POSITIONS, **TINY)
hf_dynamic_seq("albert", "AlbertConfig", "AlbertModel", embedding_size=16, **LONG_POSITIONS, **TINY)
hf_dynamic_seq("mpnet", "MPNetConfig", "MPNetModel", vocab_size=VOCAB, max_position_embeddings=130, **TINY)
hf_dynamic_seq("distilbert", "DistilBertConfig", "DistilBertModel", dim=32, n_layers=2, n_heads=2, hidden_dim=64,
               **LONG_POSITIONS)
hf_dynamic_seq("llama", "LlamaConfig", "LlamaForCausalLM", fixed=NO_CACHE, num_key_value_heads=1, **LONG_POSITIONS, **TINY)
hf_dynamic_seq("qwen2", "Qwen2Config", "Qwen2Model", fixed=NO_CACHE, num_key_value_heads=1, **LONG_POSITIONS, **TINY)
hf_dynamic_seq("mistral", "MistralConfig", "MistralModel", fixed=NO_CACHE, num_key_value_heads=1, sliding_window=8,
               **LONG_POSITIONS, **TINY)
hf_dynamic_seq("phi", "PhiConfig", "PhiModel", fixed=NO_CACHE, **LONG_POSITIONS, **TINY)
hf_dynamic_seq("gemma", "GemmaConfig", "GemmaModel", fixed=NO_CACHE, num_key_value_heads=1, head_dim=16, **LONG_POSITIONS,
               **TINY)
hf_dynamic_seq("opt", "OPTConfig", "OPTModel", fixed=NO_CACHE, hidden_size=32, num_hidden_layers=2, ffn_dim=64,
               num_attention_heads=2, word_embed_proj_dim=32, **LONG_POSITIONS)
hf_dynamic_seq("t5_encoder", "T5Config", "T5EncoderModel", vocab_size=VOCAB, d_model=32, d_kv=16, d_ff=64, num_layers=2,
               num_heads=2)
hf_dynamic_seq("t5", "T5Config", "T5Model", inputs=("input_ids", "attention_mask", "decoder_input_ids"), fixed=NO_CACHE,
               vocab_size=VOCAB, d_model=32, d_kv=16, d_ff=64, num_layers=2, num_heads=2)
hf_dynamic_seq("bart", "BartConfig", "BartModel", inputs=("input_ids", "attention_mask", "decoder_input_ids"),
               fixed=NO_CACHE, vocab_size=VOCAB, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=2,
               decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=128)


# --- export and save --------------------------------------------------------------------------

def tensors(outputs):
    """The tensors of a (possibly nested) output in pytree order, which is the graph's output order."""
    return [leaf for leaf in pytree.tree_leaves(outputs) if isinstance(leaf, torch.Tensor)]


def save_arrays(folder, arrays):
    os.makedirs(folder, exist_ok=True)
    for i, t in enumerate(arrays):
        np.save(os.path.join(folder, "%d.npy" % i), t.detach().contiguous().numpy())


def check_order(ep, inputs, expected):
    """The export's own module must give the eager outputs in this order (a wrong order would make
    every comparison in the sweep fail for the wrong reason)."""
    got = tensors(ep.module()(*inputs))
    if len(got) != len(expected):
        raise RuntimeError("export has %d outputs, eager %d" % (len(got), len(expected)))
    for i, (g, e) in enumerate(zip(got, expected)):
        if g.shape != e.shape or not torch.allclose(g.float(), e.float(), atol=1e-4, rtol=1e-4):
            raise RuntimeError("output %d of ep.module() differs from eager (shape %s vs %s)"
                               % (i, list(g.shape), list(e.shape)))


def decomposed_reference(core, inputs, expected):
    """The references for model.pt2: eager's, unless PyTorch's own run of the decomposed program
    gives an output of another shape with the same values (nn.LSTM's h_n and c_n: [2, 1, 2, 32]
    decomposed, [2, 2, 32] eager; the raw export records the first too), whose output foundryc then
    gives; that run's output is the reference, and a line says so."""
    got = tensors(core.module()(*inputs))
    out = list(expected)
    for i, (g, e) in enumerate(zip(got, expected)):
        if g.shape != e.shape and g.numel() == e.numel() and torch.allclose(
                g.float().reshape(-1), e.float().reshape(-1), atol=1e-4, rtol=1e-4):
            print("  output %d: the decomposed program gives shape %s, eager %s (same values); the reference"
                  " is the decomposed program's" % (i, list(g.shape), list(e.shape)))
            out[i] = g
    return out


def dynamic_shapes(module, inputs, kind):
    """Dimension 0 of every input is Dim('batch') (kind True), and dimension 1 Dim('seq') (kind
    "seq"), or dimensions 2 and 3 multiples of 32 (kind "image"). A forward(*args) (HFWrapper) takes all its inputs as one argument, so their specs go in
    one nested tuple."""
    if kind == "seq":
        dims = {0: torch.export.Dim("batch", min=1, max=16), 1: torch.export.Dim("seq", min=2, max=100)}
    elif kind == "image":
        dims = {0: torch.export.Dim("batch", min=1, max=4), 2: 32 * torch.export.Dim("height32", min=2, max=8),
                3: 32 * torch.export.Dim("width32", min=2, max=8)}
    else:
        dims = {0: torch.export.Dim("batch", min=1, max=64)}
    specs = tuple(dict(dims) for _ in inputs)
    params = inspect.signature(module.forward).parameters.values()
    return (specs,) if any(p.kind == p.VAR_POSITIONAL for p in params) else specs


def round_to_levels(module, levels):
    """Each floating-point parameter and buffer rounded to `levels` evenly spaced values between
    its minimum and maximum (so a positive variance stays positive)."""
    with torch.no_grad():
        for t in list(module.parameters()) + list(module.buffers()):
            if not t.is_floating_point() or t.numel() < 2:
                continue
            lo, hi = t.min(), t.max()
            if hi > lo:
                step = (hi - lo) / (levels - 1)
                t.copy_(lo + torch.round((t - lo) / step) * step)


def export_one(name, entry, out_dir, weight_levels=0):
    torch.manual_seed(SEED)
    module, inputs = entry["builder"]()
    module.eval()
    if weight_levels:
        round_to_levels(module, weight_levels)
    with torch.no_grad():
        expected = tensors(module(*inputs))
        ep = torch.export.export(module, inputs, dynamic_shapes=dynamic_shapes(module, inputs, entry["dynamic"]) if entry["dynamic"] else None)
        check_order(ep, inputs, expected)
        core = ep.run_decompositions()
        expected = decomposed_reference(core, inputs, expected)
    folder = os.path.join(out_dir, name)
    os.makedirs(folder, exist_ok=True)
    torch.export.save(core, os.path.join(folder, "model.pt2"))
    torch.export.save(ep, os.path.join(folder, "model.raw.pt2"))
    save_arrays(os.path.join(folder, "inputs"), inputs)
    save_arrays(os.path.join(folder, "expected"), expected)
    cases = save_dynamic_cases(entry, module, folder) if entry["dynamic"] else []
    meta = dict(name=name, family=entry["family"], source=entry["source"], dynamic=entry["dynamic"],
                inputs=[dict(shape=list(t.shape), dtype=str(t.dtype).replace("torch.", "")) for t in inputs],
                outputs=[dict(shape=list(t.shape), dtype=str(t.dtype).replace("torch.", "")) for t in expected],
                params=sum(p.numel() for p in module.parameters()), cases=cases,
                weight_levels=weight_levels, torch=torch.__version__)
    with open(os.path.join(folder, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
    return meta


def save_dynamic_cases(entry, module, folder):
    """Inputs and eager outputs at each batch in DYNAMIC_BATCHES (cases/bN), each (batch, length)
    in DYNAMIC_SEQ_CASES (cases/bNsL), or each (batch, height, width) in DYNAMIC_IMAGE_CASES
    (cases/bNhHwW), from the same seeded weights (the builder is called again
    only for its inputs)."""
    sizes = {"seq": DYNAMIC_SEQ_CASES, "image": DYNAMIC_IMAGE_CASES}.get(entry["dynamic"], [(b,) for b in DYNAMIC_BATCHES])
    cases = []
    for size in sizes:
        torch.manual_seed(SEED + sum(size))
        _, inputs = entry["builder"](*size)
        with torch.no_grad():
            expected = tensors(module(*inputs))
        name = "b%d" % size[0] + ("s%d" % size[1] if len(size) == 2 else "h%dw%d" % size[1:] if len(size) == 3 else "")
        case = os.path.join(folder, "cases", name)
        save_arrays(os.path.join(case, "inputs"), inputs)
        save_arrays(os.path.join(case, "expected"), expected)
        cases.append(name)
    return cases


def one_line_reason(exc):
    text = ("%s: %s" % (type(exc).__name__, exc)).strip().splitlines()
    return text[0][:300] if text else type(exc).__name__


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", nargs="?")
    parser.add_argument("--only", help="comma-separated model names")
    parser.add_argument("--list", action="store_true", help="print the model names and exit")
    parser.add_argument("--traceback", action="store_true", help="print the whole traceback of a failure")
    parser.add_argument("--image-size", type=int, default=64, help="the CNN classifiers' image size")
    parser.add_argument("--weight-levels", type=int, default=0,
                        help="round the weights to this many values each (archives that compress)")
    args = parser.parse_args()
    global CNN_IMAGE_SIZE
    CNN_IMAGE_SIZE = args.image_size
    if args.list:
        print("\n".join(REGISTRY))
        return 0
    if not args.out_dir:
        parser.error("OUT_DIR is needed")
    names = args.only.split(",") if args.only else list(REGISTRY)
    unknown = [n for n in names if n not in REGISTRY]
    if unknown:
        parser.error("unknown model(s): %s (see --list)" % ", ".join(unknown))
    warnings.filterwarnings("ignore")  # torch and transformers deprecation noise; failures are reported below
    os.makedirs(args.out_dir, exist_ok=True)
    failed = []
    for name in names:
        start = time.time()
        try:
            meta = export_one(name, REGISTRY[name], args.out_dir, args.weight_levels)
            print("exported %-40s %9d params  %5.1f s" % (name, meta["params"], time.time() - start), flush=True)
        except Exception as exc:  # one model's failure must not stop the sweep
            failed.append(name)
            print("FAILED   %-40s %s" % (name, one_line_reason(exc)), flush=True)
            if args.traceback:
                traceback.print_exc()
    print("%d of %d models exported%s" % (len(names) - len(failed), len(names),
                                          "; failed: " + ", ".join(failed) if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
