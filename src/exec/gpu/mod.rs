//! The machine's GPUs: which there are ([`discovery`]: NVML, `nvidia-smi`, fake devices),
//! which MIG instances they offer ([`mig`]), how busy they are ([`telemetry`]), which jobs hold more than their slice ([`overuse`]), and which were lost ([`health`]).

pub mod discovery;
pub mod health;
pub mod mig;
pub mod overuse;
pub mod telemetry;
