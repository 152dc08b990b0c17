"""Training the backbone: `learning_curve` (every checkpoint copy scored),
`backbone_experiments` (short runs at equal CPU time), and the checkpoint scoring both use."""
