-- The invoicing example domain (the demo's and the tests' schema).
-- No table is schema-qualified: applied as it is, the tables land in the first schema of the
-- search_path (`public`); the demo applies it after `SET search_path TO <its own schema>`.
-- customer.email and customer.card_number are sensitive: no mapper allowlists them, so they
-- never reach an event, event metadata or a failed record.

create table customer (
  id          text primary key,
  name        text not null,
  email       text not null,
  card_number text,
  country     text not null,
  created_at  timestamptz not null default now()
);

create table invoice (
  id          text primary key,
  customer_id text not null references customer(id),
  number      text,
  status      text not null check (status in ('draft', 'issued', 'paid', 'void')),
  currency    char(3) not null,
  total       numeric(12,2) not null default 0,
  issued_at   timestamptz,
  due_date    date,
  void_reason text,
  created_at  timestamptz not null default now(),
  updated_at  timestamptz not null default now()
);

create table invoice_line (
  invoice_id  text not null references invoice(id),
  line_no     int not null,
  description text not null,
  quantity    int not null,
  unit_price  numeric(12,2) not null,
  amount      numeric(12,2) not null,
  primary key (invoice_id, line_no)
);

create table payment (
  id         text primary key,
  invoice_id text not null references invoice(id),
  amount     numeric(12,2) not null,
  currency   char(3) not null,
  paid_at    timestamptz not null
);

-- The invoice-lifecycle mapper declares `before: ['status']` for invoice (it reacts to status
-- transitions), so PostgreSQL must send old values of non-key columns: mapperRequirements()
-- reports needsOldValues for <schema>.invoice, and the source refuses to start without this.
alter table invoice replica identity full;
