/** Where the observability listener is bound (port 0 in the configuration becomes the port the system picked). */
export interface ObservabilityAddress {
  readonly host: string;
  readonly port: number;
  /** `http://host:port` (IPv6 hosts in brackets). */
  readonly url: string;
}
