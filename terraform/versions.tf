terraform {
  # The test suite (tests/*.tftest.hcl) uses mock overrides during plan (`override_during`), new in 1.11;
  # 1.11 is also the only version this configuration has been planned and tested with.
  required_version = ">= 1.11.0, < 2.0.0"

  required_providers {
    aws = {
      source = "hashicorp/aws"
      # 5.60 brought the Batch and ECR arguments used here; 6.x renames Batch arguments.
      version = "~> 5.60"
    }
  }
}
