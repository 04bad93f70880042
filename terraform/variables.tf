# ---------------------------------------------------------------- where and what it is called

variable "region" {
  description = "AWS region to create everything in."
  type        = string
  default     = "us-east-1"

  validation {
    condition     = can(regex("^[a-z]{2}(-[a-z]+)+-[0-9]$", var.region))
    error_message = "region must be an AWS region name such as us-east-1."
  }
}

variable "name_prefix" {
  description = "Prefix of every resource name (queues, compute environments, roles, repository, log group)."
  type        = string
  default     = "cleanrl"

  validation {
    # lower case for the ECR repository; short enough for IAM role names (64 characters)
    condition     = can(regex("^[a-z][a-z0-9-]{0,30}[a-z0-9]$", var.name_prefix))
    error_message = "name_prefix must be 2-32 characters of lower-case letters, digits and '-', starting with a letter and not ending with '-'."
  }
}

variable "tags" {
  description = "Extra tags put on every resource (the provider's default_tags)."
  type        = map(string)
  default     = {}
}

# ---------------------------------------------------------------- network (the researcher's VPC)

variable "subnet_ids" {
  description = "Subnets the Batch instances are launched in, e.g. the default VPC's subnets. They need a route to ECR, CloudWatch Logs, Secrets Manager/SSM and W&B: a public subnet (with auto-assigned public IPs) or a private one behind a NAT gateway."
  type        = list(string)

  validation {
    condition     = length(var.subnet_ids) > 0 && alltrue([for s in var.subnet_ids : can(regex("^subnet-[0-9a-f]{8,17}$", s))])
    error_message = "subnet_ids must be a non-empty list of subnet ids (subnet-...)."
  }
}

variable "security_group_ids" {
  description = "Security groups of the Batch instances. Jobs need outbound access only: a group with no inbound rules and the default allow-all egress is enough."
  type        = list(string)

  validation {
    condition     = length(var.security_group_ids) > 0 && alltrue([for s in var.security_group_ids : can(regex("^sg-[0-9a-f]{8,17}$", s))])
    error_message = "security_group_ids must be a non-empty list of security group ids (sg-...)."
  }
}

# ---------------------------------------------------------------- compute environments

variable "cpu_instance_types" {
  description = "Instance types or families for the two CPU compute environments (on-demand and spot). Batch picks the size; several families give spot more pools to draw from."
  type        = list(string)
  default     = ["c6i", "m6i", "c5", "m5"]

  validation {
    condition     = length(var.cpu_instance_types) > 0 && alltrue([for t in var.cpu_instance_types : can(regex("^([a-z][a-z0-9-]*(\\.[a-z0-9]+)?|optimal)$", t))])
    error_message = "cpu_instance_types must be a non-empty list of instance types or families (c6i, c6i.large, optimal), none empty."
  }
}

variable "gpu_instance_types" {
  description = "Instance types or families with NVIDIA GPUs for the two GPU compute environments (g4dn: T4, g5: A10G, g6: L4...). The instances boot the ECS-optimized Amazon Linux 2023 NVIDIA AMI: check that it supports the families you list."
  type        = list(string)
  default     = ["g4dn", "g5"]

  validation {
    condition     = length(var.gpu_instance_types) > 0 && alltrue([for t in var.gpu_instance_types : can(regex("^[gp][0-9][a-z0-9-]*(\\.[a-z0-9]+)?$", t))])
    error_message = "gpu_instance_types must be a non-empty list of GPU instance types or families (g4dn, g5.xlarge, g6...): G or P families only."
  }
}

variable "max_vcpus" {
  description = "Most vCPUs each compute environment may run at once (they all scale down to 0 when idle). A GPU instance counts with its vCPUs: g4dn.xlarge is 4."
  type = object({
    cpu_on_demand = optional(number, 16)
    cpu_spot      = optional(number, 64)
    gpu_on_demand = optional(number, 8)
    gpu_spot      = optional(number, 32)
  })
  default = {}

  validation {
    condition     = alltrue([for v in values(var.max_vcpus) : v != null && v >= 0 && v <= 10000 && floor(v) == v])
    error_message = "Each max_vcpus entry must be a whole number from 0 to 10000."
  }
}

variable "spot_bid_percentage" {
  description = "Highest spot price, in percent of the on-demand price, that the spot compute environments pay (100: up to the on-demand price)."
  type        = number
  default     = 100

  validation {
    condition     = var.spot_bid_percentage >= 1 && var.spot_bid_percentage <= 100 && floor(var.spot_bid_percentage) == var.spot_bid_percentage
    error_message = "spot_bid_percentage must be a whole number from 1 to 100."
  }
}

variable "root_volume_size_gib" {
  description = "Size of each instance's encrypted root volume, which holds the pulled images (a CUDA PyTorch image is several GiB)."
  type        = number
  default     = 60

  validation {
    condition     = var.root_volume_size_gib >= 30 && var.root_volume_size_gib <= 16384 && floor(var.root_volume_size_gib) == var.root_volume_size_gib
    error_message = "root_volume_size_gib must be a whole number from 30 (the ECS AMI's own size) to 16384."
  }
}

# ---------------------------------------------------------------- job definition

variable "image_tag" {
  description = "Tag of the image in this stack's ECR repository that the job definition runs. Tags are immutable: push each build under a new tag (e.g. the git commit) and apply again with that tag."
  type        = string
  default     = "latest"

  validation {
    condition     = can(regex("^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$", var.image_tag))
    error_message = "image_tag must be a valid Docker tag (letters, digits, '_', '.', '-'; at most 128 characters)."
  }
}

variable "job_command" {
  description = "Default command of the job definition; each submission normally overrides it (containerOverrides.command)."
  type        = list(string)
  default     = ["python", "cleanrl/ppo.py", "--help"]

  validation {
    condition     = try(var.job_command[0], "") != ""
    error_message = "job_command must be a non-empty list whose first element is the program."
  }
}

variable "job_vcpus" {
  description = "vCPUs a job asks for unless the submission overrides it."
  type        = number
  default     = 2

  validation {
    condition     = var.job_vcpus >= 1 && floor(var.job_vcpus) == var.job_vcpus
    error_message = "job_vcpus must be a whole number of at least 1."
  }
}

variable "job_memory_mib" {
  description = "Memory (MiB) a job asks for unless the submission overrides it. Keep it under the instance's memory less what ECS reserves (a 4 GiB c6i.large offers about 3.5 GiB)."
  type        = number
  default     = 3072

  validation {
    condition     = var.job_memory_mib >= 128 && floor(var.job_memory_mib) == var.job_memory_mib
    error_message = "job_memory_mib must be a whole number of at least 128."
  }
}

variable "job_gpus" {
  description = "GPUs a job asks for unless the submission overrides it; 0 for CPU jobs. Jobs sent to a GPU queue should ask for at least 1."
  type        = number
  default     = 0

  validation {
    condition     = var.job_gpus >= 0 && var.job_gpus <= 16 && floor(var.job_gpus) == var.job_gpus
    error_message = "job_gpus must be a whole number from 0 to 16."
  }
}

variable "job_environment" {
  description = "Plain environment variables of every job (e.g. WANDB_PROJECT). Never secrets: the W&B API key comes from wandb_api_key_arn."
  type        = map(string)
  default     = {}

  validation {
    condition     = !contains([for k in keys(var.job_environment) : upper(k)], "WANDB_API_KEY")
    error_message = "job_environment must not hold WANDB_API_KEY: put the key in Secrets Manager or SSM Parameter Store and pass its ARN as wandb_api_key_arn."
  }
}

variable "job_timeout_seconds" {
  description = "Each attempt of a job is stopped after this many seconds."
  type        = number
  default     = 86400

  validation {
    condition     = var.job_timeout_seconds >= 60 && floor(var.job_timeout_seconds) == var.job_timeout_seconds
    error_message = "job_timeout_seconds must be a whole number of at least 60 (the Batch minimum)."
  }
}

variable "job_attempts" {
  description = "Attempts per job. Only attempts lost to the instance going away (spot reclaim, host failure) are retried; a script that exits non-zero fails the job at once."
  type        = number
  default     = 3

  validation {
    condition     = var.job_attempts >= 1 && var.job_attempts <= 10 && floor(var.job_attempts) == var.job_attempts
    error_message = "job_attempts must be a whole number from 1 to 10."
  }
}

variable "job_stop_timeout_seconds" {
  description = "Seconds between the SIGTERM and the SIGKILL when ECS stops a job's container (a terminated job, a timed-out attempt): the script finishes its step, writes its checkpoint and pushes it to the run store. Spot gives two minutes' notice, so 120 is the most a reclaim can use."
  type        = number
  default     = 120

  validation {
    condition     = var.job_stop_timeout_seconds >= 30 && var.job_stop_timeout_seconds <= 3600 && floor(var.job_stop_timeout_seconds) == var.job_stop_timeout_seconds
    error_message = "job_stop_timeout_seconds must be a whole number from 30 (ECS's default) to 3600."
  }
}

variable "wandb_api_key_arn" {
  description = "ARN of the Secrets Manager secret (plain-text value) or the SSM Parameter Store parameter (SecureString) that holds the W&B API key. Jobs get it as WANDB_API_KEY; the job execution role may read this one secret only."
  type        = string

  validation {
    condition     = can(regex("^arn:aws[a-z-]*:(secretsmanager:[a-z0-9-]+:[0-9]{12}:secret:[A-Za-z0-9/_+=.@-]+|ssm:[a-z0-9-]+:[0-9]{12}:parameter/[A-Za-z0-9/_.-]+)$", var.wandb_api_key_arn))
    error_message = "wandb_api_key_arn must be the full ARN of a Secrets Manager secret (arn:aws:secretsmanager:REGION:ACCOUNT:secret:NAME-xxxxxx) or an SSM parameter (arn:aws:ssm:REGION:ACCOUNT:parameter/NAME)."
  }
}

variable "wandb_api_key_kms_key_arn" {
  description = "ARN of the customer-managed KMS key that encrypts the W&B secret, if any; null when it uses the AWS-managed key (aws/secretsmanager or aws/ssm), which needs no extra permission."
  type        = string
  default     = null

  validation {
    condition     = var.wandb_api_key_kms_key_arn == null || can(regex("^arn:aws[a-z-]*:kms:[a-z0-9-]+:[0-9]{12}:key/[0-9a-f-]+$", var.wandb_api_key_kms_key_arn))
    error_message = "wandb_api_key_kms_key_arn must be null or a KMS key ARN (arn:aws:kms:REGION:ACCOUNT:key/ID)."
  }
}

variable "job_role_policy_arns" {
  description = "IAM policies to attach to the job role, the identity the training code itself runs as (e.g. one allowing uploads to another S3 bucket). None by default: the role may use the run store, which is all the scripts need."
  type        = set(string)
  default     = []

  validation {
    condition     = alltrue([for a in var.job_role_policy_arns : can(regex("^arn:aws[a-z-]*:iam::([0-9]{12}|aws):policy/.+$", a))])
    error_message = "job_role_policy_arns must hold IAM policy ARNs."
  }
}

# ---------------------------------------------------------------- images and logs

variable "ecr_keep_images" {
  description = "The ECR repository keeps this many most recent images and expires older ones."
  type        = number
  default     = 30

  validation {
    condition     = var.ecr_keep_images >= 1 && floor(var.ecr_keep_images) == var.ecr_keep_images
    error_message = "ecr_keep_images must be a whole number of at least 1."
  }
}

variable "ecr_force_delete" {
  description = "Let `terraform destroy` delete the ECR repository while it still holds images."
  type        = bool
  default     = false
}

variable "run_store_expiration_days" {
  description = "Days after which S3 deletes the objects of the run store (run folders: checkpoints, logs, models); null keeps them until you delete them."
  type        = number
  default     = null

  validation {
    condition     = var.run_store_expiration_days == null || try(var.run_store_expiration_days >= 1 && floor(var.run_store_expiration_days) == var.run_store_expiration_days, false)
    error_message = "run_store_expiration_days must be null or a whole number of at least 1."
  }
}

variable "run_store_force_destroy" {
  description = "Let `terraform destroy` delete the run store's bucket while it still holds run folders (they are deleted with it)."
  type        = bool
  default     = false
}

variable "log_retention_days" {
  description = "Days CloudWatch Logs keeps the jobs' output."
  type        = number
  default     = 30

  validation {
    condition     = contains([1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653], var.log_retention_days)
    error_message = "log_retention_days must be one of the values CloudWatch Logs accepts: 1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288 or 3653."
  }
}
