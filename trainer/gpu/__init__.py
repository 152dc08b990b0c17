"""The default backbone trained in one short run on a lent GPU (issue #47): the packer
(pack.py), the run (run.py), and the restore side (restore.py). docs/GPU.md says how."""
