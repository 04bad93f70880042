provider "aws" {
  region = var.region

  default_tags {
    tags = merge({ "cleanrl:stack" = var.name_prefix }, var.tags)
  }
}

data "aws_partition" "current" {}

data "aws_caller_identity" "current" {}
