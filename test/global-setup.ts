// Placeholder: replaced by the PostgreSQL rig's global setup.
export default function setup(): void {}
