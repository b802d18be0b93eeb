"""The capstone ViT: model, data and training (vit), fold-kernel inference (folded), ViT-L block profiles
(vit_l). Shared by
notebooks/17_capstone_vit.ipynb and benchmarks/capstone_vit.py."""
